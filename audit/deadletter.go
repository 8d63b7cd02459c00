package audit

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"

	"smsgw/otp"
)

// DeadLetterFile is where rows Postgres refused for their data are kept, in
// the spool directory (shared by the replicas on a host): one JSON object a
// line, {"at", "sqlstate", "error", "row", "raw"}. "row" is the row in its
// usual JSON shape; "raw" holds, base64-encoded, the exact bytes of any
// field JSON cannot carry (invalid UTF-8), so nothing of the row is lost.
const DeadLetterFile = "dead-letter.jsonl"

// deadLetters appends refused rows to DeadLetterFile. Without a spool
// directory they are only logged (whole).
type deadLetters struct {
	mu   sync.Mutex
	path string
	// kept remembers the rows kept lately, so a row refused again (its
	// group timed out after it was set apart, and was replayed) is kept
	// once.
	kept map[string]bool
}

// first reports whether the row with this id is not kept yet, and marks it.
func (l *deadLetters) first(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.kept[id] {
		return false
	}
	if l.kept == nil || len(l.kept) >= 10000 {
		l.kept = map[string]bool{}
	}
	l.kept[id] = true
	return true
}

type deadLetter struct {
	At       time.Time         `json:"at"`
	SQLState string            `json:"sqlstate"`
	Error    string            `json:"error"`
	Row      otp.AuditEvent    `json:"row"`
	Raw      map[string]string `json:"raw,omitempty"`
}

func newDeadLetter(e otp.AuditEvent, pgErr *pgconn.PgError) deadLetter {
	d := deadLetter{At: time.Now().UTC(), SQLState: pgErr.Code, Error: pgErr.Message, Row: e}
	for name, v := range map[string]string{"id": e.ID, "kind": e.Kind, "outcome": e.Outcome, "request_id": e.RequestID,
		"phone_e164": e.Phone, "reason": e.Reason, "provider": e.Provider, "provider_message_id": e.MessageID, "api_key": e.APIKey} {
		if !utf8.ValidString(v) {
			if d.Raw == nil {
				d.Raw = map[string]string{}
			}
			d.Raw[name] = base64.StdEncoding.EncodeToString([]byte(v))
		}
	}
	return d
}

// keep appends d and syncs it.
func (l *deadLetters) keep(d deadLetter) error {
	if l.path == "" {
		return nil
	}
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("audit: dead letters: %w", err)
	}
	defer f.Close()
	if _, err := f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("audit: dead letters: %w", err)
	}
	return f.Sync()
}

func deadLetterPath(spoolDir string) string {
	if spoolDir == "" {
		return ""
	}
	return filepath.Join(spoolDir, DeadLetterFile)
}
