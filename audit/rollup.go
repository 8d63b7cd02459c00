package audit

import (
	"context"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"smsgw/otp"
)

// rollups is the aggregator of answers that texted nobody (Writer.Note). It
// never waits: a plain row is handed to the writer's queue of rows nobody
// waits for, and what is past a subject's share of rows this minute, or past
// the replica's rows this second, is a map update on the rollup of its
// (subject, kind, outcome, reason, minute), or of its (kind, outcome,
// reason, minute) when even a new rollup would be one row too many. The
// flush loop hands changed rollups to the writer every second, so a crash
// loses at most about a second of them.
//
// Exactly once: a rollup row carries the absolute count of this process (an
// instance) for its key and minute, under an id made of the instance, the
// key and the minute, and is upserted with count = GREATEST(stored, new).
// Writing it again (the next second's flush, a retried batch, a replayed
// spool, in any order) never counts a request twice, and a restarted process
// is a new instance with rows of its own, so sum(count) over the table is
// the requests answered.
type rollups struct {
	perSubject int       // rows of their own per subject and minute
	perSecond  int       // rows (plain and new rollups) per second
	maxKeys    int       // bound of both maps: past it, answers fold wider
	instance   uuid.UUID // this process's: a restart is a new instance

	mu     sync.Mutex
	minute int64          // the minute seen counts
	seen   map[string]int // rows of their own per subject this minute
	second int64          // the second budget counts
	budget int            // rows left this second
	open   map[rollupKey]*rollupRow
}

type rollupKey struct {
	minute                         int64
	subject, kind, outcome, reason string // subject "": any subject
}

type rollupRow struct {
	ev    otp.AuditEvent
	dirty bool // changed since the last flush
}

func newRollups(perSubject, perSecond, maxKeys int) *rollups {
	return &rollups{perSubject: perSubject, perSecond: perSecond, maxKeys: maxKeys, instance: uuid.New(),
		seen: map[string]int{}, open: map[rollupKey]*rollupRow{}}
}

// note counts e against subject. emit hands a row of its own to the writer
// without blocking and says whether it took it; when it does not (the queue
// is full), e is counted on a rollup instead, so it is never lost.
func (r *rollups) note(e otp.AuditEvent, subject string, emit func(otp.AuditEvent) bool) {
	minute, second := unixFloor(e.Time, 60), unixFloor(e.Time, 1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if minute > r.minute {
		r.minute = minute
		clear(r.seen)
	}
	if second > r.second { // a late answer of the second before spends this one's budget
		r.second, r.budget = second, r.perSecond
	}
	n, known := r.seen[subject]
	if n < r.perSubject && r.budget > 0 && (known || len(r.seen) < r.maxKeys) && emit(e) {
		r.seen[subject] = n + 1
		r.budget--
		return
	}
	k := rollupKey{minute: minute, subject: subject, kind: e.Kind, outcome: e.Outcome, reason: e.Reason}
	row := r.open[k]
	if row == nil && (r.budget <= 0 || len(r.open) >= r.maxKeys) {
		// One row too many: fold into the rollup of any subject, whose keys
		// are as few as the kinds, outcomes and reasons.
		k.subject = ""
		row = r.open[k]
	}
	if row == nil {
		row = &rollupRow{ev: r.start(k, e), dirty: true}
		r.open[k] = row
		if k.subject != "" {
			r.budget--
		}
		return
	}
	row.add(e)
}

// start is a new rollup of k whose first request is e.
func (r *rollups) start(k rollupKey, e otp.AuditEvent) otp.AuditEvent {
	e.ID = r.id(k)
	e.Count, e.LastAt, e.Subject = 1, e.Time, k.subject
	if k.subject == "" {
		e.Phone, e.ClientIP, e.APIKey = "", netip.Addr{}, ""
	}
	return e
}

// add counts e on the rollup. The row keeps the first request's time and
// request id; a number, address or API key stays only while every request
// had the same.
func (row *rollupRow) add(e otp.AuditEvent) {
	row.dirty = true
	row.ev.Count++
	if e.Time.After(row.ev.LastAt) {
		row.ev.LastAt = e.Time
	}
	if e.Phone != row.ev.Phone {
		row.ev.Phone = ""
	}
	if e.ClientIP != row.ev.ClientIP {
		row.ev.ClientIP = netip.Addr{}
	}
	if e.APIKey != row.ev.APIKey {
		row.ev.APIKey = ""
	}
}

// changed takes the rollups changed since the last call, and forgets those
// of minutes that are over and written.
func (r *rollups) changed(now time.Time) []otp.AuditEvent {
	current := unixFloor(now, 60)
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []otp.AuditEvent
	for k, row := range r.open {
		if row.dirty {
			out = append(out, row.ev)
			row.dirty = false
		} else if k.minute < current {
			delete(r.open, k)
		}
	}
	return out
}

// retry marks rollups the writer did not take as changed again.
func (r *rollups) retry(events []otp.AuditEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range events {
		k := rollupKey{minute: unixFloor(e.Time, 60), subject: e.Subject, kind: e.Kind, outcome: e.Outcome, reason: e.Reason}
		if row := r.open[k]; row != nil {
			row.dirty = true
		}
	}
}

// id names a rollup row: the same for the same instance, key and minute, so
// its every write is an upsert of one row.
func (r *rollups) id(k rollupKey) string {
	name := strconv.AppendInt(nil, k.minute, 10)
	for _, s := range []string{k.subject, k.kind, k.outcome, k.reason} {
		name = append(append(name, 0), s...)
	}
	return uuid.NewSHA1(r.instance, name).String()
}

// unixFloor is t in whole units of unit seconds since the epoch.
func unixFloor(t time.Time, unit int64) int64 {
	s := t.Unix()
	if s < 0 && s%unit != 0 {
		return s/unit - 1
	}
	return s / unit
}

// Note records an answer that texted nobody and changed no code, without
// waiting: a row of its own while its subject has had fewer than
// RowsPerSubjectMinute this minute and the replica fewer than RowsPerSecond
// this second, else a count on a rollup, written within RollupEvery.
func (w *Writer) Note(e otp.AuditEvent, subject string) {
	w.rollups.note(e, subject, w.offer)
}

// offer queues a row nobody waits for if there is room right now.
func (w *Writer) offer(e otp.AuditEvent) bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return false
	}
	select {
	case w.unwaited.queue <- pending{e: &e}:
		return true
	default:
		return false
	}
}

// rollupLoop queues the rollups that changed every RollupEvery until ctx
// ends (Close queues the last of them).
func (w *Writer) rollupLoop(ctx context.Context) {
	tick := time.NewTicker(w.opts.RollupEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := w.flushRollups(ctx); err != nil && ctx.Err() == nil {
				w.log.Warn("audit rollups not queued; kept for the next flush", "err", err)
			}
		}
	}
}

// flushRollups queues the rollups that changed since the last flush,
// waiting at most RollupEvery for room; those the queue does not take are
// kept for the next.
func (w *Writer) flushRollups(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, w.opts.RollupEvery)
	defer cancel()
	changed := w.rollups.changed(time.Now())
	for i, e := range changed {
		if err := w.enqueue(ctx, w.unwaited, pending{e: &e}); err != nil {
			w.rollups.retry(changed[i:])
			return err
		}
	}
	return nil
}
