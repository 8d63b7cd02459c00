package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"smsgw/otp"
)

// ErrSpoolFull means the spool reached its size cap: rows can no longer be
// made durable while Postgres is away.
var ErrSpoolFull = errors.New("audit: spool full")

// spool is the local, fsynced overflow of the audit log while Postgres is
// slow or down: a directory of segment files, each line one row as
// "<crc32 hex> <json>". Rows are appended and synced before their requests
// are answered; segments are replayed into Postgres in order and then
// deleted. One process owns a spool directory (an exclusive flock).
type spool struct {
	dir  string
	lock *os.File

	mu       sync.Mutex
	active   *os.File // nil until the next append
	seq      uint64   // the active segment's number, or the last one's
	closed   []uint64 // segments waiting to be replayed, oldest first
	bytes    int64    // of all segments
	rows     int64    // rows appended and not yet replayed (approximate after a restart)
	activeSz int64
}

func segmentName(seq uint64) string { return fmt.Sprintf("spool-%020d.log", seq) }

// openSpool takes the directory (creating it) and finds the segments a
// previous run left, to be replayed first.
func openSpool(dir string) (*spool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("audit.spool_dir: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit.spool_dir: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("audit.spool_dir: %s is in use by another smsgw process; give each its own", dir)
	}
	s := &spool{dir: dir, lock: lock}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("audit.spool_dir: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "spool-") || !strings.HasSuffix(name, ".log") {
			continue
		}
		seq, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(name, "spool-"), ".log"), 10, 64)
		if err != nil {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, err
		}
		s.closed = append(s.closed, seq)
		s.bytes += info.Size()
		s.seq = max(s.seq, seq)
	}
	slices.Sort(s.closed)
	if len(s.closed) > 0 {
		s.rows = -1 // unknown until replayed
	}
	return s, nil
}

// append writes rows and syncs them to disk: when it returns nil they survive
// a crash. hardCap bounds the spool's size.
func (s *spool) append(events []otp.AuditEvent, hardCap int64) error {
	var buf bytes.Buffer
	for _, e := range events {
		line, err := json.Marshal(toSpoolRow(e))
		if err != nil {
			return err
		}
		fmt.Fprintf(&buf, "%08x %s\n", crc32.ChecksumIEEE(line), line)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bytes+int64(buf.Len()) > hardCap {
		return ErrSpoolFull
	}
	if s.active == nil {
		s.seq++
		f, err := os.OpenFile(filepath.Join(s.dir, segmentName(s.seq)), os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("audit: spool: %w", err)
		}
		if err := syncDir(s.dir); err != nil {
			f.Close()
			return err
		}
		s.active, s.activeSz = f, 0
	}
	n, err := s.active.Write(buf.Bytes())
	s.bytes += int64(n)
	s.activeSz += int64(n)
	if err == nil {
		err = s.active.Sync()
	}
	if err != nil {
		// The rows were not acknowledged. Close the segment so its partial
		// line stays its torn tail, ignored at replay.
		s.active.Close()
		s.active = nil
		s.closed = append(s.closed, s.seq)
		return fmt.Errorf("audit: spool: %w", err)
	}
	if s.rows >= 0 {
		s.rows += int64(len(events))
	}
	return nil
}

// rotate closes the active segment, so what was spooled so far can be
// replayed while new rows go to a new segment, and lists the segments to
// replay, oldest first.
func (s *spool) rotate() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active != nil {
		s.active.Close()
		s.active = nil
		s.closed = append(s.closed, s.seq)
	}
	return slices.Clone(s.closed)
}

// read returns a segment's rows. A torn last line (a crash mid-append; its
// rows were never acknowledged) is dropped; damage anywhere else is an error.
func (s *spool) read(seq uint64) ([]otp.AuditEvent, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, segmentName(seq)))
	if err != nil {
		return nil, err
	}
	lines := bytes.Split(b, []byte("\n"))
	// The piece after the last newline is empty, or a torn append.
	lines = lines[:len(lines)-1]
	out := make([]otp.AuditEvent, 0, len(lines))
	for i, line := range lines {
		e, err := parseSpoolLine(line)
		if err != nil {
			return out, fmt.Errorf("audit: spool %s line %d: %w", segmentName(seq), i+1, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// remove deletes a replayed segment.
func (s *spool) remove(seq uint64, rows int) error {
	path := filepath.Join(s.dir, segmentName(seq))
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = slices.DeleteFunc(s.closed, func(q uint64) bool { return q == seq })
	s.bytes -= info.Size()
	if s.rows >= 0 {
		s.rows -= int64(rows)
	}
	if len(s.closed) == 0 && s.active == nil {
		s.rows = 0
	}
	return syncDir(s.dir)
}

// quarantine moves a damaged segment aside for a person to look at.
func (s *spool) quarantine(seq uint64) error {
	from := filepath.Join(s.dir, segmentName(seq))
	info, err := os.Stat(from)
	if err != nil {
		return err
	}
	if err := os.Rename(from, from+".damaged"); err != nil {
		return err
	}
	s.mu.Lock()
	s.closed = slices.DeleteFunc(s.closed, func(q uint64) bool { return q == seq })
	s.bytes -= info.Size()
	s.mu.Unlock()
	return syncDir(s.dir)
}

// empty reports whether nothing waits for replay.
func (s *spool) empty() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.closed) == 0 && (s.active == nil || s.activeSz == 0)
}

func (s *spool) size() (bytes, rows int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes, s.rows
}

func (s *spool) close() {
	s.mu.Lock()
	if s.active != nil {
		s.active.Close()
		s.active = nil
	}
	s.mu.Unlock()
	s.lock.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// spoolRow is a row's stable on-disk form.
type spoolRow struct {
	ID        string    `json:"id"`
	Time      time.Time `json:"t"`
	Kind      string    `json:"k"`
	Outcome   string    `json:"o"`
	RequestID string    `json:"r"`
	Phone     string    `json:"p,omitempty"`
	ClientIP  string    `json:"ip,omitempty"`
	Reason    string    `json:"why,omitempty"`
	Provider  string    `json:"pv,omitempty"`
	MessageID string    `json:"m,omitempty"`
	APIKey    string    `json:"key,omitempty"`
}

func toSpoolRow(e otp.AuditEvent) spoolRow {
	r := spoolRow{ID: e.ID, Time: e.Time, Kind: e.Kind, Outcome: e.Outcome, RequestID: e.RequestID, Phone: e.Phone,
		Reason: e.Reason, Provider: e.Provider, MessageID: e.MessageID, APIKey: e.APIKey}
	if e.ClientIP.IsValid() {
		r.ClientIP = e.ClientIP.String()
	}
	return r
}

func parseSpoolLine(line []byte) (otp.AuditEvent, error) {
	sum, body, ok := bytes.Cut(line, []byte(" "))
	if !ok || len(sum) != 8 {
		return otp.AuditEvent{}, errors.New("not a spool line")
	}
	want, err := strconv.ParseUint(string(sum), 16, 32)
	if err != nil || uint32(want) != crc32.ChecksumIEEE(body) {
		return otp.AuditEvent{}, errors.New("checksum mismatch")
	}
	var r spoolRow
	if err := json.Unmarshal(body, &r); err != nil {
		return otp.AuditEvent{}, err
	}
	e := otp.AuditEvent{ID: r.ID, Time: r.Time, Kind: r.Kind, Outcome: r.Outcome, RequestID: r.RequestID, Phone: r.Phone,
		Reason: r.Reason, Provider: r.Provider, MessageID: r.MessageID, APIKey: r.APIKey}
	if r.ClientIP != "" {
		e.ClientIP, _ = netip.ParseAddr(r.ClientIP)
	}
	return e, nil
}
