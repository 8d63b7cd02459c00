package audit

import (
	"context"
	"encoding/json"
	"io"
	"sync"

	"smsgw/otp"
)

// JSONLines is an otp.AuditLog that prints one JSON object per event, for dev
// mode where there is no Postgres: the row's one JSON shape, led by
// "audit": "audit_log" so it stands out among log lines.
type JSONLines struct {
	mu sync.Mutex
	w  io.Writer
}

// NewJSONLines returns a JSONLines writing to w.
func NewJSONLines(w io.Writer) *JSONLines { return &JSONLines{w: w} }

// Accepting is always nil: stderr does not fill up.
func (j *JSONLines) Accepting() error { return nil }

// Finish prints the final line of a send.
func (j *JSONLines) Finish(e otp.AuditEvent) { _ = j.Record(context.Background(), e) }

// Note prints an answer that texted nobody as a line of its own: dev mode
// has no disk to save.
func (j *JSONLines) Note(e otp.AuditEvent, _ string) { _ = j.Record(context.Background(), e) }

// Record writes e as one line.
func (j *JSONLines) Record(_ context.Context, e otp.AuditEvent) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	line := append([]byte(`{"audit":"audit_log",`), b[1:]...)
	j.mu.Lock()
	defer j.mu.Unlock()
	_, err = j.w.Write(append(line, '\n'))
	return err
}
