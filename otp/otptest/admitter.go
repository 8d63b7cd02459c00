package otptest

import (
	"context"

	"smsgw/otp"
)

// Admitter is an otp.SendAdmitter over the other fakes: it claims, decides
// the windows, reserves the pumping budgets and issues the code in that
// order, stops at the first refusal and gives back what it counted, as one
// step of the real store does.
type Admitter struct {
	AdmitFn     func(ctx context.Context, a otp.Admission) (otp.Admitted, error)
	Limiter     otp.Limiter
	Pumping     otp.PumpingGuard
	Codes       otp.CodeStore
	Idempotency otp.IdempotencyStore
}

func (f *Admitter) Admit(ctx context.Context, a otp.Admission) (otp.Admitted, error) {
	if f.AdmitFn != nil {
		return f.AdmitFn(ctx, a)
	}
	out := otp.Admitted{Claim: otp.Claimed}
	if a.Scope != "" {
		c, prior, err := f.Idempotency.Claim(ctx, a.Scope, a.Ticket, a.ClaimTTL)
		if err != nil || c != otp.Claimed {
			out.Claim, out.Prior = c, prior
			return out, err
		}
	}
	dec, err := f.Limiter.Allow(ctx, a.Ticket, a.Subjects)
	if err != nil {
		return out, err
	}
	out.Decision, out.Limited = dec, true
	if !dec.Allowed {
		return out, nil
	}
	if a.Pumping {
		r, err := f.Pumping.Reserve(ctx, a.Phone, a.ClientIP, a.Bypass)
		if err != nil || r.Refused != nil {
			_ = f.Limiter.Refund(ctx, a.Ticket, a.Subjects)
			out.Pumping = r
			return out, err
		}
		out.Pumping = r
	}
	pending, err := f.Codes.Issue(ctx, a.Phone.E164, a.Code, a.CodeTTL)
	if err != nil {
		_ = f.Limiter.Refund(ctx, a.Ticket, a.Subjects)
		if out.Pumping.Ticket != nil {
			_ = f.Pumping.Release(ctx, out.Pumping)
		}
		return otp.Admitted{Claim: otp.Claimed}, err
	}
	out.Issued, out.Pending = true, pending
	return out, nil
}
