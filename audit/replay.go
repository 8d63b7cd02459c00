package audit

import (
	"context"
	"time"
)

// replay moves spooled rows into Postgres, oldest first, whenever Postgres
// answers, and switches back to writing there once the spool is empty. Now
// and then it adopts the spools of replicas that are gone. It runs until
// ctx ends (or Close's deadline passes).
func (w *Writer) replay(ctx context.Context) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	adopt := time.NewTicker(w.opts.AdoptEvery)
	defer adopt.Stop()
	w.adoptOrphans(ctx) // a replica may have died while none was running
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.giveUp.Done():
			return
		case <-adopt.C:
			w.adoptOrphans(ctx)
			continue
		case <-tick.C:
		}
		if !w.sw.replaying() {
			continue
		}
		dctx, cancel := context.WithTimeout(w.giveUp, time.Minute)
		if err := w.drain(dctx); err != nil {
			w.log.Warn("audit spool replay paused", "err", err)
		}
		cancel()
	}
}

// drain replays the own spool and goes back to writing to Postgres. It is
// the replay loop's, and Close's once the loop has ended: never two at once.
func (w *Writer) drain(ctx context.Context) error {
	if err := w.pool.Ping(ctx); err != nil {
		return err
	}
	for pass := 0; ; pass++ {
		if err := w.replaySegments(ctx, w.spool); err != nil {
			return err
		}
		// Back to Postgres only if nothing was spooled meanwhile; otherwise
		// replay that too first. Under steady load something always was:
		// after a few passes the rest is replayed with the writers held, so
		// the switch cannot be put off for ever (it holds them for what
		// arrived during one pass).
		w.sw.mu.Lock()
		if !w.spool.empty() && pass >= 2 {
			if err := w.replaySegments(ctx, w.spool); err != nil {
				w.sw.mu.Unlock()
				return err
			}
		}
		if w.spool.empty() {
			if w.sw.state == toSpool {
				w.sw.state = toPostgres
			}
			w.sw.mu.Unlock()
			w.log.Info("audit spool replayed; writing to Postgres again")
			return nil
		}
		w.sw.mu.Unlock()
	}
}

// replaySegments moves every closed segment of sp into Postgres, oldest
// first, and deletes it.
func (w *Writer) replaySegments(ctx context.Context, sp *spool) error {
	for _, seq := range sp.rotate() {
		events, err := sp.read(seq)
		if err != nil {
			w.log.Error("audit spool segment is damaged; moved aside for inspection, its readable rows replayed", "segment", segmentName(seq), "dir", sp.dir, "err", err)
		}
		for i := 0; i < len(events); i += w.opts.BatchSize {
			if werr := w.store(ctx, group{rows: events[i:min(i+w.opts.BatchSize, len(events))], retry: true}); werr != nil {
				return werr
			}
		}
		if err != nil {
			if qerr := sp.quarantine(seq); qerr != nil {
				return qerr
			}
		} else if err := sp.remove(seq, len(events)); err != nil {
			return err
		}
		w.replayed.Add(float64(len(events)))
		w.log.Info("audit spool segment replayed into Postgres", "segment", segmentName(seq), "dir", sp.dir, "rows", len(events))
	}
	return nil
}

// adoptOrphans replays the spools no live process holds: a replica that
// died leaves its rows to whichever replica on the host looks first.
func (w *Writer) adoptOrphans(ctx context.Context) {
	if !w.PostgresReady() {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := w.pool.Ping(pctx)
	cancel()
	if err != nil {
		return // Postgres is away: orphaned rows are safe where they are
	}
	for _, dir := range orphans(w.opts.SpoolDir, w.spool.dir) {
		sp, err := lockSpool(dir)
		if err != nil || sp == nil {
			continue
		}
		if !sp.empty() {
			w.log.Warn("adopting the audit spool of a replica that is gone", "dir", dir)
			rctx, cancel := context.WithTimeout(ctx, time.Minute)
			if err := w.replaySegments(rctx, sp); err != nil {
				w.log.Warn("adopted audit spool left for later", "dir", dir, "err", err)
			} else {
				w.log.Info("adopted audit spool replayed", "dir", dir)
			}
			cancel()
		}
		sp.close()
	}
}
