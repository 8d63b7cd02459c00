package verification

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
)

// maxGroup bounds one group's records, so a statement's arrays stay a
// modest size. It is large because groups are written one at a time: when
// Postgres hangs, each group waits out inTx's deadline, and what queued
// meanwhile must fit in the next group, not wait for several.
const maxGroup = 4096

// groupQueue shares one transaction among the changes that arrive together
// (a group commit): each accepted send used to pay for a transaction of its
// own, several statements and a WAL flush, which made its record most of
// Postgres's work on the accepted path
// (docs/measurements/2026-11-27-accepted-path-since-70db059.md).
//
// There is no goroutine of its own: the first caller to find no group in
// flight leads, writes what is queued (its own change among it) and hands
// the lead to the first caller still queued, so no caller writes more than
// one group and nothing needs starting or stopping.
type groupQueue[T any] struct {
	// write writes one group in tx, in the order the changes arrived.
	write func(ctx context.Context, tx pgx.Tx, group []T) error

	mu      sync.Mutex
	waiting []*groupCall[T]
	leading bool
}

// groupCall is one change waiting for its group.
type groupCall[T any] struct {
	in T
	// done carries the group's result, or lead=true when this call is to
	// lead the next group. Never both at once: a call is told to lead only
	// while it is still queued.
	done chan groupResult
}

type groupResult struct {
	err  error
	lead bool
}

// do queues in, leads groups when told to, and returns when in's group is
// durable (or failed).
func (q *groupQueue[T]) do(ctx context.Context, s *Store, in T) error {
	c := &groupCall[T]{in: in, done: make(chan groupResult, 1)}
	q.mu.Lock()
	q.waiting = append(q.waiting, c)
	lead := !q.leading
	q.leading = true
	q.mu.Unlock()
	if lead {
		q.writeGroup(ctx, s)
	}
	for {
		r := <-c.done
		if !r.lead {
			return r.err
		}
		q.writeGroup(ctx, s)
	}
}

// writeGroup writes up to maxGroup queued changes in one transaction, tells
// each its result, then passes the lead to the first call still queued.
func (q *groupQueue[T]) writeGroup(ctx context.Context, s *Store) {
	q.mu.Lock()
	n := min(len(q.waiting), maxGroup)
	group := q.waiting[:n:n]
	q.waiting = q.waiting[n:]
	q.mu.Unlock()

	ins := make([]T, len(group))
	for i, c := range group {
		ins[i] = c.in
	}
	err := s.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error { return q.write(ctx, tx, ins) })
	for _, c := range group {
		c.done <- groupResult{err: err}
	}

	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiting) == 0 {
		q.leading = false
		return
	}
	q.waiting[0].done <- groupResult{lead: true}
}

// inRounds writes ins in rounds whose keys are distinct (one statement
// cannot change a row twice), in order: a change and a later one to the
// same record land in two rounds of one group.
func inRounds[T any](ins []T, key func(T) string, round func([]T) error) error {
	for len(ins) > 0 {
		n := len(ins)
		seen := make(map[string]bool, len(ins))
		for i, in := range ins {
			if seen[key(in)] {
				n = i
				break
			}
			seen[key(in)] = true
		}
		if err := round(ins[:n]); err != nil {
			return err
		}
		ins = ins[n:]
	}
	return nil
}
