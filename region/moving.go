package region

import (
	"context"
	"errors"
	"sync"
	"time"

	"smsgw/otp"
	"smsgw/ratelimit"
)

// moving runs admit (a home's composed call) and decides the send's
// windows in the other homes that hold some (the previous home while the
// number's country is being moved) at the same time, for good: the send is
// admitted only when all admit, and what one counted is taken back when
// another refuses or fails. One round trip of latency, as over a
// Cluster's slots; no window holds more than its max in any home. A home
// out of reach, with a fallback allowed, has its windows decided on the
// fallback ledger once the rest admitted (so a refusal elsewhere records
// nothing to carry), as the limiter decides a move (decideMoving).
//
// The idempotency claim lives in the new home only, so a duplicate in
// flight, stopped there by the claim, still counts in the previous home's
// windows for the round trip before its refund: a request whose number has
// no more room there than it has duplicates in flight may be refused by
// them (it answers 429 and gives up its claim; a duplicate then claims
// and sends). Never an admission too many, never a second text
// (docs/regions.md, "A move, as built").
func (a admitter) moving(ctx context.Context, adm otp.Admission, others []part,
	admit func(context.Context, otp.Admission) (otp.Admitted, error), u undoer) (otp.Admitted, error) {
	if len(others) == 0 {
		return admit(ctx, adm)
	}
	var (
		got  otp.Admitted
		err  error
		wg   sync.WaitGroup
		decs = make([]otp.Decision, len(others))
		errs = make([]error, len(others))
	)
	wg.Go(func() { got, err = admit(ctx, adm) })
	for i, o := range others {
		wg.Go(func() { decs[i], errs[i] = o.store.Limiter.Allow(ctx, adm.Ticket, o.subjects) })
	}
	wg.Wait()
	whole := err == nil && got.Claim == otp.Claimed && got.Limited && got.Decision.Allowed && got.Pumping.Refused == nil && got.Issued
	var (
		held, ledger []part // admitted in their home; on the fallback ledger
		cut          []int
		refusal      *otp.Decision
		failed       error
		dec, have    = got.Decision, len(adm.Subjects) > 0
	)
	note := func(o part, d otp.Decision, err error, onLedger bool) {
		switch {
		case err != nil:
			failed = errors.Join(failed, err)
		case !d.Allowed:
			if refusal == nil || d.RetryAfter > refusal.RetryAfter {
				refusal = &d
			}
		default:
			if onLedger {
				ledger = append(ledger, o)
			} else {
				held = append(held, o)
			}
			if have {
				d = merged(d, dec, true, nil)
			}
			dec, have = d, true
		}
	}
	for i, o := range others {
		if errs[i] != nil && a.d.fallsBack(o.store, errs[i]) {
			cut = append(cut, i)
			continue
		}
		note(o, decs[i], errs[i], false)
	}
	for _, i := range cut {
		if !whole || failed != nil || refusal != nil {
			break // asked only once every other part admitted
		}
		o := others[i]
		a.d.o.Log.WarnContext(ctx, "a home out of reach; deciding its windows from the fallback ledger", "home", o.store.Name, "err", errs[i])
		d, err := a.d.fallbackAllow(ctx, adm.Ticket, o)
		note(o, d, err, true)
	}
	if whole && failed == nil && refusal == nil {
		if len(adm.Subjects) > 0 {
			dec.Now = got.Decision.Now // admit's clock: a fallback's is this region's, for the carry
		}
		got.Decision = dec
		return got, nil
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for _, o := range held {
		if rerr := o.store.Limiter.Refund(uctx, adm.Ticket, o.subjects); rerr != nil {
			a.d.o.Log.WarnContext(ctx, "another home's windows not refunded; the quota stays used", "home", o.store.Name, "err", rerr)
		}
	}
	limiter{a.d}.refundFallbacks(uctx, adm.Ticket, ledger)
	if !whole {
		return got, err
	}
	if uerr := u.Undo(uctx, adm, got); uerr != nil {
		a.d.o.Log.WarnContext(ctx, "taking a send back from its home failed; the quota stays used", "err", uerr)
	}
	if failed != nil {
		return otp.Admitted{Claim: otp.Claimed}, failed
	}
	refusal.Policies = ratelimit.PoliciesOf(adm.Subjects)
	return otp.Admitted{Claim: got.Claim, Decision: *refusal, Limited: true}, nil
}
