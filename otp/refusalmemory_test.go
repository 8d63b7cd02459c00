package otp_test

import (
	"context"
	"testing"
	"time"

	"smsgw/otp"
	"smsgw/otp/otptest"
)

// remembering is an admitter whose memory refuses every phone subject.
type remembering struct {
	*otptest.Admitter
	asked int
}

func (r *remembering) Remembered(subjects []otp.Subject) (otp.Decision, bool) {
	r.asked++
	w := otp.Window{Scope: "phone", Rule: otp.Rule{Window: time.Minute, Max: 3}, Reset: 40 * time.Second}
	return otp.Decision{Now: time.Now(), Tightest: w, RetryAfter: w.Reset, Policies: []otp.Window{w}}, true
}

func TestRememberedRefusalMakesNoCode(t *testing.T) {
	mem := &remembering{}
	admitted := 0
	w := newWorld(t, func(_ *otp.Config, d *otp.Deps, w *world) {
		mem.Admitter = w.admit
		d.Admitter = mem
		w.admit.AdmitFn = func(ctx context.Context, a otp.Admission) (otp.Admitted, error) {
			admitted++
			// What the store answers from the same memory.
			d, _ := mem.Remembered(a.Subjects)
			return otp.Admitted{Claim: otp.Claimed, Decision: d, Limited: true}, nil
		}
	})
	res, err := w.send(t, sendReq(phone))
	wantCode(t, err, otp.ERateLimited)
	if admitted != 0 || mem.asked != 1 {
		t.Fatalf("admitter asked %d times, memory %d: a remembered refusal goes to the store", admitted, mem.asked)
	}
	if !res.Limited || res.Reason != "phone:1m" || res.Decision.RetryAfterSeconds() != 40 {
		t.Fatalf("result %+v: want the remembered decision, reason phone:1m", res)
	}
	// With an Idempotency-Key the store claims first: a replay answers
	// before any refusal.
	if _, err := w.send(t, keyed("k1")); otp.ErrorCode(err) != otp.ERateLimited || admitted != 1 {
		t.Fatalf("keyed send: %v, admitter asked %d times, want once", err, admitted)
	}
}
