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
// deleted. One process owns a spool directory (an exclusive flock, which the
// kernel lets go when the process dies, however it dies).
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

// replicaPrefix names the spool of each replica under audit.spool_dir, so
// replicas started from one config file on one host each keep their own.
const replicaPrefix = "replica-"

// openSpool takes the first spool under parent that no live process holds
// (creating parent and it as needed), with whatever rows a dead replica left
// in it, to be replayed first.
func openSpool(parent string) (*spool, error) {
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return nil, fmt.Errorf("audit.spool_dir: %w", err)
	}
	for i := 0; i < 1024; i++ {
		dir := filepath.Join(parent, fmt.Sprintf("%s%d", replicaPrefix, i))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("audit.spool_dir: %w", err)
		}
		s, err := lockSpool(dir)
		if err != nil {
			return nil, fmt.Errorf("audit.spool_dir: %w", err)
		}
		if s != nil {
			return s, nil
		}
	}
	return nil, fmt.Errorf("audit.spool_dir: %s: 1024 replicas' spools are all in use", parent)
}

// orphans lists the spools under parent a replica may have left: each
// replica's directory but own, and parent itself (the layout before there
// was one spool per replica).
func orphans(parent, own string) []string {
	var out []string
	if old, _ := filepath.Glob(filepath.Join(parent, "spool-*.log")); len(old) > 0 {
		out = append(out, parent)
	}
	entries, _ := os.ReadDir(parent)
	for _, e := range entries {
		dir := filepath.Join(parent, e.Name())
		if e.IsDir() && strings.HasPrefix(e.Name(), replicaPrefix) && dir != own {
			out = append(out, dir)
		}
	}
	return out
}

// lockSpool takes dir's lock and lists its segments; it returns nil, nil when
// another process holds it.
func lockSpool(dir string) (*spool, error) {
	// Read-only: a flock needs no write access, and an open writable file
	// would keep the spool's file system from being remounted read-only.
	lock, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, err
	}
	s := &spool{dir: dir, lock: lock}
	entries, err := os.ReadDir(dir)
	if err != nil {
		lock.Close()
		return nil, err
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
			lock.Close()
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
		line, err := json.Marshal(e)
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
	if err != nil && s.active.Truncate(s.activeSz-int64(n)) == nil {
		// A short write (a full disk): cut it off and keep the segment, so
		// retries do not leave a torn segment each.
		s.bytes -= int64(n)
		s.activeSz -= int64(n)
		return fmt.Errorf("audit: spool: %w", err)
	}
	if err == nil {
		err = s.active.Sync()
	}
	if err != nil {
		// The rows were not acknowledged, and after a failed sync the file's
		// state is unknown. Close the segment so a partial line stays its
		// torn tail, ignored at replay.
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

func parseSpoolLine(line []byte) (otp.AuditEvent, error) {
	sum, body, ok := bytes.Cut(line, []byte(" "))
	if !ok || len(sum) != 8 {
		return otp.AuditEvent{}, errors.New("not a spool line")
	}
	want, err := strconv.ParseUint(string(sum), 16, 32)
	if err != nil || uint32(want) != crc32.ChecksumIEEE(body) {
		return otp.AuditEvent{}, errors.New("checksum mismatch")
	}
	var e otp.AuditEvent
	if err := json.Unmarshal(body, &e); err != nil {
		return otp.AuditEvent{}, err
	}
	if e.Time.IsZero() {
		return parseLegacyRow(body)
	}
	return e, nil
}

// legacyRow is how spools written before rows had one JSON shape held them,
// read so an upgrade replays what an older version left.
type legacyRow struct {
	ID        string    `json:"id"`
	Time      time.Time `json:"t"`
	Kind      string    `json:"k"`
	Outcome   string    `json:"o"`
	RequestID string    `json:"r"`
	Phone     string    `json:"p"`
	ClientIP  string    `json:"ip"`
	Reason    string    `json:"why"`
	Provider  string    `json:"pv"`
	MessageID string    `json:"m"`
	APIKey    string    `json:"key"`
}

func parseLegacyRow(body []byte) (otp.AuditEvent, error) {
	var r legacyRow
	if err := json.Unmarshal(body, &r); err != nil || r.Time.IsZero() {
		return otp.AuditEvent{}, errors.New("a row without a time")
	}
	e := otp.AuditEvent{ID: r.ID, Time: r.Time, Kind: r.Kind, Outcome: r.Outcome, RequestID: r.RequestID, Phone: r.Phone,
		Reason: r.Reason, Provider: r.Provider, MessageID: r.MessageID, APIKey: r.APIKey}
	if r.ClientIP != "" {
		e.ClientIP, _ = netip.ParseAddr(r.ClientIP)
	}
	return e, nil
}
