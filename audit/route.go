package audit

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// route is the Postgres-or-spool switch, with one lock. Every group holds
// it to read while it is written, so the switch between Postgres and the
// spool, which holds it to write, falls between groups and never under one:
// no row goes to Postgres while older rows wait in the spool, bar the rows
// of a group that was already under way.
//
// Its states:
//
//   - toPostgres: groups go to Postgres. A group Postgres does not take
//     within the write timeout is spooled, and the state turns to toSpool.
//   - toSpool: groups go to the spool, in order, while the replay moves the
//     spool into Postgres; once it is empty, back to toPostgres. A start
//     with rows left in the spool starts here.
//   - noSchema: the schema is not known to exist (migrations have not run):
//     groups are spooled and nothing is replayed until SetPostgresReady(true),
//     which turns it to toSpool.
//
// Without a spool only toPostgres and noSchema are used, and a group waits
// for Postgres instead (writeWithRetry).
type route struct {
	mu    sync.RWMutex
	state routeState
}

type routeState int

const (
	toPostgres routeState = iota
	toSpool
	noSchema
)

// spooling reports whether rows go to the spool (a gauge).
func (r *route) spooling() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.state != toPostgres
}

// replaying reports whether the spool is to be moved into Postgres.
func (r *route) replaying() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.state == toSpool
}

// SetPostgresReady says whether the schema is known to exist (migrations
// ran). Until it is, rows are spooled.
func (w *Writer) SetPostgresReady(ready bool) {
	w.sw.mu.Lock()
	defer w.sw.mu.Unlock()
	switch {
	case !ready:
		w.sw.state = noSchema
	case w.sw.state == noSchema && w.spool != nil:
		w.sw.state = toSpool // the replay moves what was spooled meanwhile
	case w.sw.state == noSchema:
		w.sw.state = toPostgres
	}
}

// PostgresReady reports what SetPostgresReady last said (true at first).
func (w *Writer) PostgresReady() bool {
	w.sw.mu.RLock()
	defer w.sw.mu.RUnlock()
	return w.sw.state != noSchema
}

// commit makes a group durable: in Postgres when it is answering in time,
// else in the spool, which then takes every group until it is replayed.
// When the spool cannot take them either, Postgres is asked once more (it
// may be back before the replay noticed); past that the group is not
// durable.
// Without a spool it waits for Postgres until ctx ends.
func (w *Writer) commit(ctx context.Context, g group) error {
	w.sw.mu.RLock()
	state := w.sw.state
	if state == toPostgres {
		err := w.timed(g)
		if err == nil {
			w.sw.mu.RUnlock()
			return nil
		}
		w.sw.mu.RUnlock()
		if w.spool == nil {
			return w.writeWithRetry(ctx, g, err)
		}
		w.log.Error("Postgres did not take audit rows in time; spooling them locally until it does", "rows", len(g.rows), "err", err)
		// Switch and spool the group as one step, so no group goes to
		// Postgres in between. A group Postgres took too long for may still
		// commit; its replay then finds the rows stored and skips them.
		w.sw.mu.Lock()
		defer w.sw.mu.Unlock()
		if w.sw.state == toPostgres {
			w.sw.state = toSpool
		}
		return w.toSpool(g, false)
	}
	if w.spool == nil {
		w.sw.mu.RUnlock()
		return w.writeWithRetry(ctx, g, errors.New("postgres not ready"))
	}
	defer w.sw.mu.RUnlock()
	return w.toSpool(g, state == toSpool)
}

// toSpool appends a group to the spool; if that fails and tryPostgres is
// set, Postgres gets one more try. The caller holds the route.
func (w *Writer) toSpool(g group, tryPostgres bool) error {
	err := w.spool.append(g.rows, w.hardCap())
	if err == nil {
		w.spooled.Add(float64(len(g.rows)))
		return nil
	}
	if tryPostgres && w.timed(g) == nil {
		return nil
	}
	w.log.Error("audit rows are durable nowhere: sends answer 503 until Postgres or the spool takes rows again", "rows", len(g.rows), "err", err)
	return fmt.Errorf("%w: %w", ErrNotDurable, err)
}

// hardCap is where the spool refuses rows: 10% (and 1 MiB) past the cap
// at which sends stop, room for the rows of the requests refused meanwhile.
func (w *Writer) hardCap() int64 { return w.opts.SpoolMaxBytes + w.opts.SpoolMaxBytes/10 + 1<<20 }
