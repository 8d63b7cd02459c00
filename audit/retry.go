package audit

import (
	"context"
	"time"
)

// timed stores a group in Postgres within the write timeout.
func (w *Writer) timed(g group) error {
	ctx, cancel := context.WithTimeout(w.giveUp, w.opts.WriteTimeout)
	defer cancel()
	if err := w.store(ctx, g); err != nil {
		w.failed.Inc()
		return err
	}
	w.written.Add(float64(len(g.rows)))
	return nil
}

// writeWithRetry is the path without a spool: wait for Postgres, backing
// off up to 5 s, until it takes the group, ctx ends (the loop stops; the
// rows stay in its backlog for Close) or Close's deadline passes (they are
// lost).
func (w *Writer) writeWithRetry(ctx context.Context, g group, err error) error {
	events := g.rows
	backoff := 50 * time.Millisecond
	for {
		if w.giveUp.Err() != nil {
			w.lost.Add(float64(len(events)))
			w.log.Error("audit rows lost: Postgres unreachable at shutdown and no spool", "rows", len(events), "err", err)
			return err
		}
		if ctx.Err() != nil {
			return err
		}
		w.log.Error("audit batch write failed; retrying", "rows", len(events), "retry_in", backoff, "err", err)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			continue
		}
		backoff = min(backoff*2, 5*time.Second)
		ctx, cancel := context.WithTimeout(w.giveUp, 10*time.Second)
		err = w.store(ctx, group{rows: events, retry: true})
		cancel()
		if err == nil {
			w.written.Add(float64(len(events)))
			return nil
		}
		w.failed.Inc()
	}
}
