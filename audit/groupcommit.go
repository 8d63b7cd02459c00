package audit

import (
	"context"
	"time"

	"smsgw/otp"
)

// committer is one queue of rows and its group commit: a group is what is
// waiting when a write starts, after gathering for linger if it is
// positive.
type committer struct {
	queue  chan pending
	linger time.Duration
	// waited: someone waits for these rows, so this queue also says
	// whether rows can be made durable (Accepting).
	waited bool
	// backlog holds rows that could be made durable nowhere (their waiters
	// were told); they go first in every later write. Only the loop that
	// owns the committer touches it (Run's, then Close's).
	backlog []otp.AuditEvent
}

func newCommitter(size int, linger time.Duration, waited bool) *committer {
	return &committer{queue: make(chan pending, size), linger: linger, waited: waited}
}

// group is what one write takes: the rows, which of them are sends' final
// outcomes, and whether they were tried before (any may be stored already).
type group struct {
	rows   []otp.AuditEvent
	finals map[string]bool
	retry  bool
}

// halves splits a group, keeping what is known of its rows.
func (g group) halves() (group, group) {
	n := len(g.rows) / 2
	return group{rows: g.rows[:n], finals: g.finals, retry: g.retry}, group{rows: g.rows[n:], finals: g.finals, retry: g.retry}
}

// groupCommit writes c's rows in groups until ctx ends or the queue is
// closed; what is left is Close's (writeRest). The backlog is tried again
// every RetryEvery.
func (w *Writer) groupCommit(ctx context.Context, c *committer) {
	retry := time.NewTicker(w.opts.RetryEvery)
	defer retry.Stop()
	batch := make([]pending, 0, w.opts.BatchSize)
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return
		case p, ok := <-c.queue:
			if !ok {
				return
			}
			batch = append(batch, p)
		case <-retry.C:
			if len(c.backlog) == 0 {
				continue
			}
		}
		// Group commit: take the first row, then whatever else arrives
		// while lingering and is waiting after. Under load batches grow by
		// themselves; when idle (no linger) a row is written at once.
		w.write(ctx, c, take(c.queue, batch, w.opts.BatchSize, c.linger))
	}
}

// writeRest writes what is left in c's closed queue, then its backlog once
// more, waiting for Postgres (without a spool) until Close's deadline.
func (w *Writer) writeRest(c *committer) {
	batch := make([]pending, 0, w.opts.BatchSize)
	for {
		batch = take(c.queue, batch[:0], w.opts.BatchSize, 0)
		if len(batch) == 0 {
			break
		}
		w.write(w.giveUp, c, batch)
	}
	if len(c.backlog) == 0 {
		return
	}
	if err := w.commit(w.giveUp, group{rows: c.backlog, retry: true}); err != nil {
		w.lost.Add(float64(len(c.backlog)))
		w.log.Error("audit rows lost at shutdown: durable nowhere", "rows", len(c.backlog), "err", err)
	}
	c.backlog = nil
}

// write commits the backlog and batch as one group and tells the waiters.
// Without a spool it waits for Postgres until ctx ends.
func (w *Writer) write(ctx context.Context, c *committer, batch []pending) {
	g := group{rows: make([]otp.AuditEvent, len(c.backlog), len(c.backlog)+len(batch)), retry: len(c.backlog) > 0}
	copy(g.rows, c.backlog)
	for _, p := range batch {
		g.rows = append(g.rows, *p.e)
		if p.final {
			if g.finals == nil {
				g.finals = map[string]bool{}
			}
			g.finals[p.e.ID] = true
		}
	}
	err := w.commit(ctx, g)
	if err == nil {
		if len(c.backlog) > 0 {
			w.log.Info("audit rows are durable again", "kept_rows", len(c.backlog))
		}
		c.backlog = nil
		if c.waited {
			w.notDurable.Store(nil)
		}
	} else {
		c.backlog = w.bound(g.rows)
		if c.waited {
			w.notDurable.Store(&err)
		}
	}
	for _, p := range batch {
		if p.done != nil {
			p.done <- err
		}
	}
}

// take adds rows from queue to batch, up to size and until the queue is
// closed: while linger (if positive) has not passed it waits for them, then
// it takes only what is already waiting.
func take(queue <-chan pending, batch []pending, size int, linger time.Duration) []pending {
	var lingering <-chan time.Time // nil once linger has passed
	if linger > 0 {
		timer := time.NewTimer(linger)
		defer timer.Stop()
		lingering = timer.C
	}
	for len(batch) < size {
		var p pending
		ok := true
		if lingering != nil {
			select {
			case p, ok = <-queue:
			case <-lingering:
				lingering = nil
				continue
			}
		} else {
			select {
			case p, ok = <-queue:
			default:
				return batch
			}
		}
		if !ok {
			return batch
		}
		batch = append(batch, p)
	}
	return batch
}

// bound keeps at most QueueSize rows waiting in memory, the newest.
func (w *Writer) bound(events []otp.AuditEvent) []otp.AuditEvent {
	if over := len(events) - w.opts.QueueSize; over > 0 {
		w.lost.Add(float64(over))
		w.log.Error("audit rows lost: durable nowhere for too long, past the memory bound", "rows", over)
		events = events[over:]
	}
	return events
}
