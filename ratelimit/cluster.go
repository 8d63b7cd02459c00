package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"smsgw/internal/hashslot"
	"smsgw/internal/redisbatch"
	"smsgw/otp"
)

// slots groups the subjects by the hash slot their keys live in, in order
// of first appearance, each group keeping the subjects' order. Off Cluster
// everything is one group: one script decides it.
func (l *Limiter) slots(subjects []otp.Subject) [][]otp.Subject {
	if !l.cluster || len(subjects) < 2 {
		return [][]otp.Subject{subjects}
	}
	var groups hashslot.Groups[otp.Subject]
	for _, s := range subjects {
		groups.Add(hashslot.OfTag(s.Key), s)
	}
	return groups.List()
}

// allowAcross decides a request whose subjects live on several slots, in
// two steps of one round trip each:
//
//  1. reserve on every slot at once: each slot's script admits or refuses
//     for its own subjects and, when it admits, records the ticket as a
//     reservation, which counts against the windows at once, so concurrent
//     decisions see it, and which the next decision on that subject removes
//     if it is not committed within the lease;
//  2. if every slot admitted, commit everywhere (the ticket stays for good);
//     otherwise release what was reserved.
//
// No window ever holds more than its max, committed or not, so nothing is
// admitted over a limit, even when this replica dies between the steps.
// A request may instead be refused because of another's reservation that is
// later released: such refusals are counted (ContentionRefusals).
func (l *Limiter) allowAcross(ctx context.Context, ticket string, subjects []otp.Subject, groups [][]otp.Subject) (otp.Decision, shardReply, error) {
	d, r, err := l.reserve(ctx, ticket, subjects, groups)
	if err != nil || !d.Allowed {
		return d, r, err
	}
	if err := l.settle(ctx, ticket, settleCommit, groups); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.lease)
		defer cancel()
		_ = l.settle(rctx, ticket, settleRelease, groups) // else the leases expire
		return otp.Decision{}, shardReply{}, fmt.Errorf("ratelimit: commit: %w", err)
	}
	return d, r, nil
}

// reserve is step 1 of allowAcross: a reservation on every slot at once,
// released again unless every slot admitted.
func (l *Limiter) reserve(ctx context.Context, ticket string, subjects []otp.Subject, groups [][]otp.Subject) (otp.Decision, shardReply, error) {
	replies := make([]shardReply, len(groups))
	errs := make([]error, len(groups))
	if len(groups) == 1 {
		_, replies[0], errs[0] = l.allowOne(ctx, ticket, groups[0], nil, l.lease)
	} else {
		var wg sync.WaitGroup
		for i, g := range groups {
			wg.Go(func() { _, replies[i], errs[i] = l.allowOne(ctx, ticket, g, nil, l.lease) })
		}
		wg.Wait()
	}
	err := errors.Join(errs...)
	admitted := err == nil
	var refused *shardReply
	for i := range replies {
		if errs[i] == nil && !replies[i].allowed {
			admitted = false
			// The request fits only once every refusing slot has room.
			if refused == nil || replies[i].tight.Reset > refused.tight.Reset {
				refused = &replies[i]
			}
		}
	}
	if !admitted {
		// Give back every reservation this request may hold; one that cannot
		// be released now expires with its lease.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.lease)
		defer cancel()
		_ = l.settle(rctx, ticket, settleRelease, groups)
		if refused == nil {
			return otp.Decision{}, shardReply{}, err
		}
		// A refusal stands even if another slot failed: that slot could only
		// have refused too, or admitted a reservation now released.
		d := refused.decision()
		d.Policies = PoliciesOf(subjects)
		return d, *refused, nil
	}
	// The bounding window is the one with the least room over all slots;
	// ties go to the longer window, then to the first.
	best := replies[0].tight
	now := replies[0].now
	for _, r := range replies[1:] {
		t := r.tight
		room, bestRoom := t.Rule.Max-t.Used, best.Rule.Max-best.Used
		if room < bestRoom || (room == bestRoom && t.Rule.Window > best.Rule.Window) {
			best, now = t, r.now
		}
	}
	return otp.Decision{Allowed: true, Now: now, Tightest: best, Policies: PoliciesOf(subjects)}, shardReply{allowed: true}, nil
}

// errLeaseLost: a reservation was gone at commit (it outlived its lease and
// another decision removed it), so the request is not admitted.
var errLeaseLost = errors.New("a reservation expired before its commit")

// settle commits or releases the ticket's reservations, one settle.lua per
// slot, all at once, each riding in a pipeline with other decisions'.
func (l *Limiter) settle(ctx context.Context, ticket string, how settleMode, groups [][]otp.Subject) error {
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Go(func() {
			v, err := l.scripts.Run(ctx, settleScript, l.allowKeys(g, true), settleArgs{ticket, how}.argv()...).Result()
			var held int64
			if err == nil {
				held, err = parseSettleReply(v)
			}
			var notReplicated *redisbatch.NotReplicatedError
			if errors.As(err, &notReplicated) && how == settleRelease {
				// A release only gives quota back; a commit the replicas
				// lack would let a failover expire the reservation.
				held, err = 0, nil
			}
			if err == nil && how == settleCommit && held != int64(len(g)) {
				err = errLeaseLost
			}
			errs[i] = err
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
