package verification

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"

	"smsgw/otp"
)

// maxGroup bounds one group's records, so a statement's arrays stay a
// modest size. It is large because groups are written one at a time: when
// Postgres hangs, each group waits out inTx's deadline, and what queued
// meanwhile must fit in the next group, not wait for several.
const maxGroup = 4096

// sentQueue shares one transaction among the records of sends that arrive
// together (a group commit): each accepted send used to pay for a
// transaction of its own, several statements and a WAL flush, which made
// the record most of Postgres's work on the accepted path
// (docs/measurements/2026-11-27-accepted-path-since-70db059.md).
//
// There is no goroutine of its own: the first caller to find no group in
// flight leads, writes what is queued (its own record among it) and hands
// the lead to the first caller still queued, so no caller writes more than
// one group and nothing needs starting or stopping.
type sentQueue struct {
	mu      sync.Mutex
	waiting []*sentCall
	leading bool
}

// sentCall is one Sent waiting for its group.
type sentCall struct {
	in otp.VerificationSend
	// done carries the group's result, or nil-error lead=true when this
	// call is to lead the next group. Never both at once: a call is told to
	// lead only while it is still queued.
	done chan sentResult
}

type sentResult struct {
	err  error
	lead bool
}

// sent queues in, leads groups when told to, and returns when in's group
// is durable (or failed).
func (s *Store) sent(ctx context.Context, in otp.VerificationSend) error {
	c := &sentCall{in: in, done: make(chan sentResult, 1)}
	q := &s.queue
	q.mu.Lock()
	q.waiting = append(q.waiting, c)
	lead := !q.leading
	q.leading = true
	q.mu.Unlock()
	if lead {
		s.writeGroup(ctx)
	}
	for {
		r := <-c.done
		if !r.lead {
			return r.err
		}
		s.writeGroup(ctx)
	}
}

// writeGroup writes up to maxGroup queued records in one transaction, tells
// each its result, then passes the lead to the first call still queued.
func (s *Store) writeGroup(ctx context.Context) {
	q := &s.queue
	q.mu.Lock()
	n := min(len(q.waiting), maxGroup)
	group := q.waiting[:n:n]
	q.waiting = q.waiting[n:]
	q.mu.Unlock()

	ins := make([]otp.VerificationSend, len(group))
	for i, c := range group {
		ins[i] = c.in
	}
	err := s.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error { return s.writeSent(ctx, tx, ins) })
	for _, c := range group {
		c.done <- sentResult{err: err}
	}

	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiting) == 0 {
		q.leading = false
		return
	}
	q.waiting[0].done <- sentResult{lead: true}
}
