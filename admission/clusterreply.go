package admission

// Reading a Cluster send's replies: each slot's part concluded, and what
// the others counted given back when one refused or failed.

import (
	"context"
	"errors"
	"fmt"

	"smsgw/internal/redisbatch"
	"smsgw/otp"
	"smsgw/ratelimit"
)

// read reads every unit's reply and concludes: a refusal or failure
// anywhere takes back what the others counted.
func (a *ClusterAdmitter) read(ctx context.Context, adm otp.Admission, out otp.Admitted, units []*unit,
	groups []ratelimit.Windows, subjects [][]otp.Subject, parts sent, t *try) (otp.Admitted, error) {
	var failed, notReplicated error
	for _, u := range units {
		var nr *redisbatch.NotReplicatedError
		switch {
		case u.err != nil && u.ran != nil && errors.As(u.err, &nr):
			notReplicated = u.err
		case u.err != nil:
			failed = errors.Join(failed, u.err)
		}
	}
	// The claim: a duplicate in flight or a replay stopped on the number's
	// slot; what it counted on the others is taken back as after a
	// refusal.
	if c := parts.claim; c != nil && c.ran {
		switch {
		case c.err != nil:
			failed = errors.Join(failed, c.err)
		case c.claim != otp.Claimed:
			out.Claim, out.Prior = c.claim, c.prior
		}
	}
	// The windows: admitted only when every slot admitted.
	var admitted []otp.Subject
	decisions := make([]otp.Decision, 0, len(groups))
	for i, w := range parts.windows {
		if !w.ran {
			continue
		}
		if w.err != nil {
			failed = errors.Join(failed, w.err)
			continue
		}
		decisions = append(decisions, w.decision)
		if w.decision.Allowed {
			admitted = append(admitted, subjects[i]...)
		}
	}
	refund := func() {
		if len(admitted) > 0 {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveBackTimeout)
			defer cancel()
			if err := a.limiter.Refund(rctx, adm.Ticket, admitted); err != nil {
				a.warn(ctx, err)
			}
		}
	}
	d, allowed := combine(decisions, adm.Subjects)
	if failed != nil || out.Claim != otp.Claimed || !allowed || len(decisions) < len(groups) {
		release := parts.pumping.release(context.WithoutCancel(ctx))
		giveBack := func() {
			refund()
			if release != nil {
				release()
			}
		}
		if failed == nil && out.Claim == otp.ClaimDone {
			// A replay ends with its answer: give back after it, so a
			// replay costs one round trip. (A duplicate in flight may
			// admit again with its ticket once the claim is given up:
			// its refund must land first.)
			go giveBack()
			return out, nil
		}
		giveBack()
		if out.Claim == otp.ClaimBusy && t.counted {
			// Counted by claim.lua: the holder may wait for this.
			gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveBackTimeout)
			defer cancel()
			if err := a.idempotency.GaveBack(gctx, adm.Scope); err != nil {
				a.warn(ctx, err)
			}
		}
		if failed != nil {
			return out, fmt.Errorf("admission: %w", failed)
		}
		if out.Claim != otp.Claimed {
			return out, nil
		}
		out.Decision, out.Limited = d, true
		return out, nil
	}
	out.Decision, out.Limited = d, true
	res, err := parts.pumping.read(ctx)
	if err != nil || res.Refused != nil {
		refund()
		out.Pumping = res
		return out, err
	}
	out.Pumping = res
	if !parts.issue.ran {
		refund()
		_ = a.guard.Release(context.WithoutCancel(ctx), out.Pumping)
		return out, fmt.Errorf("admission: the code part did not run")
	}
	if err := parts.issue.err; err != nil {
		refund()
		_ = a.guard.Release(context.WithoutCancel(ctx), out.Pumping)
		return out, fmt.Errorf("admission: %w", err)
	}
	out.Pending, out.Issued = parts.issue.pending, true
	if notReplicated != nil {
		return out, a.failClosed(ctx, notReplicated, adm, out)
	}
	return out, nil
}

// combine is the decision over every slot's, as the limiter's reserve
// makes it: refused when any refused (retry once every refusing slot has
// room); else the bounding window is the one with the least room, ties to
// the longer window, then to the first.
func combine(decisions []otp.Decision, subjects []otp.Subject) (otp.Decision, bool) {
	policies := ratelimit.PoliciesOf(subjects)
	if len(decisions) == 0 {
		return otp.Decision{Allowed: true, Policies: policies}, true
	}
	var refused *otp.Decision
	for i := range decisions {
		if !decisions[i].Allowed && (refused == nil || decisions[i].Tightest.Reset > refused.Tightest.Reset) {
			refused = &decisions[i]
		}
	}
	if refused != nil {
		d := *refused
		d.Policies = policies
		return d, false
	}
	best := decisions[0]
	for _, d := range decisions[1:] {
		t, b := d.Tightest, best.Tightest
		room, bestRoom := t.Rule.Max-t.Used, b.Rule.Max-b.Used
		if room < bestRoom || (room == bestRoom && t.Rule.Window > b.Rule.Window) {
			best = d
		}
	}
	best.Policies = policies
	return best, true
}
