package admission

import (
	"context"
	"errors"

	"smsgw/otp"
)

// InTurn is an otp.SendAdmitter that asks each part on its own, one call
// each, in the order the composed script runs them: the idempotency claim,
// the windows, the pumping guard, the code store. Like the script it stops
// at the first refusal and takes back what the earlier parts counted, so a
// refused send holds nothing but the claim it took (the caller settles
// that). Several regions ask it for one case only: a caller signal the
// region does not know (pumping.ErrSeveralCalls from HomeDecision), which
// decide.lua's replies leave no room for today; moving it onto the
// composed call needs pumping's ask-again step inside the home's call
// (docs/regions.md). The parts are the deployment's, which find each
// subject's home themselves.
type InTurn struct {
	Limiter     otp.Limiter
	Pumping     otp.PumpingGuard
	Codes       otp.CodeStore
	Idempotency otp.IdempotencyStore
}

var _ otp.SendAdmitter = InTurn{}

// Admit asks the parts in turn. A claim held by another request is
// answered as ClaimBusy (the send flow waits for its answer).
func (t InTurn) Admit(ctx context.Context, adm otp.Admission) (otp.Admitted, error) {
	out := otp.Admitted{Claim: otp.Claimed}
	if adm.Scope != "" {
		claim, prior, err := t.Idempotency.Claim(ctx, adm.Scope, adm.Ticket, adm.ClaimTTL)
		if err != nil || claim != otp.Claimed {
			out.Claim, out.Prior = claim, prior
			return out, err
		}
	}
	dec, err := t.Limiter.Allow(ctx, adm.Ticket, adm.Subjects)
	if err != nil {
		return out, err
	}
	out.Decision, out.Limited = dec, true
	if !dec.Allowed {
		return out, nil
	}
	if adm.Pumping {
		r, err := t.Pumping.Reserve(ctx, adm.Phone, adm.ClientIP, adm.Bypass)
		if err != nil || r.Refused != nil {
			// A refund that fails leaves the quota used: the client is
			// refused a little early, never admitted past a limit.
			_ = t.Limiter.Refund(ctx, adm.Ticket, adm.Subjects)
			out.Pumping = r
			return out, err
		}
		out.Pumping = r
	}
	pending, err := t.Codes.Issue(ctx, adm.Phone.E164, adm.Code, adm.CodeTTL)
	if err != nil {
		errs := []error{err, t.Limiter.Refund(ctx, adm.Ticket, adm.Subjects)}
		if out.Pumping.Ticket != nil {
			errs = append(errs, t.Pumping.Release(ctx, out.Pumping))
		}
		return otp.Admitted{Claim: otp.Claimed}, errors.Join(errs...)
	}
	out.Issued, out.Pending = true, pending
	return out, nil
}
