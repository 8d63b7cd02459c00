package otp_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"smsgw/otp"
	"smsgw/otp/otptest"
)

var errDown = errors.New("down")

// rangeRule is a pumping rule's refusal as the guard answers it.
var rangeRule = otp.PumpingRefusal{Rule: "range_1k", Scope: "range", Subject: "+1415555xxxx", Used: 9, Limit: 8,
	Window: time.Hour, RetryAfter: time.Minute}

// refuseUnlessBypassed is a guard whose rule refuses every send that has not
// passed a challenge.
func refuseUnlessBypassed(r otp.PumpingRefusal) setup {
	return func(_ *otp.Config, _ *otp.Deps, w *world) {
		w.pumping.ReserveFn = func(_ context.Context, _ otp.Phone, _ netip.Addr, bypass bool) (otp.PumpingReservation, error) {
			if bypass {
				return otp.PumpingReservation{}, nil
			}
			return otp.PumpingReservation{Refused: &r}, nil
		}
	}
}

func withChallenge(verify func(context.Context, string, netip.Addr) error) setup {
	return func(_ *otp.Config, d *otp.Deps, _ *world) {
		d.Challenge = otptest.Challenge{Provider: "turnstile", VerifyFn: verify}
	}
}

// sendCase is one branch of Service.Send: the world it runs in, the request,
// and what must hold after it.
type sendCase struct {
	name   string
	setup  []setup
	req    func(r *otp.SendRequest)
	code   string // the error code wanted; "" for a text
	reason string
	check  func(t *testing.T, w *world, res otp.SendResult)
}

// nothingHeld checks that a refused send holds nothing: no text, no quota,
// no pumping reservation, no code.
func nothingHeld(t *testing.T, w *world, _ otp.SendResult) {
	t.Helper()
	if n := len(w.sender.Texts()); n != 0 {
		t.Errorf("%d texts, want none", n)
	}
	if n := w.limiter.Used(otp.SendPhoneKey + phone); n != 0 {
		t.Errorf("phone window holds %d, want 0", n)
	}
	if reserved, released, _, _ := w.pumping.Counts(); reserved != released {
		t.Errorf("pumping reserved %d, released %d", reserved, released)
	}
	if _, ok := w.pending(t); ok {
		t.Error("a code is pending")
	}
}

// texted checks a send that went out: one text, its row durable as sending
// before it, the quota and the code held.
func texted(t *testing.T, w *world, res otp.SendResult) {
	t.Helper()
	if n := len(w.sender.Texts()); n != 1 {
		t.Fatalf("%d texts, want 1", n)
	}
	rows := w.audit.Recorded()
	if len(rows) != 1 || rows[0].Outcome != otp.OutcomeSending || rows[0].Phone != phone || rows[0].Kind != otp.KindSend ||
		rows[0].Reason != res.Reason || rows[0].ID == "" || !rows[0].ClientIP.IsValid() {
		t.Fatalf("rows %+v, want one sending row", rows)
	}
	if !res.Sending || res.Receipt.Provider != "fake" || res.ExpiresIn != 10*time.Minute || res.VerificationID == "" {
		t.Fatalf("result %+v", res)
	}
	if n := w.limiter.Used(otp.SendPhoneKey + phone); n != 1 {
		t.Errorf("phone window holds %d, want 1", n)
	}
	if _, ok := w.pending(t); !ok {
		t.Error("no code is pending")
	}
	if _, _, sent, _ := w.pumping.Counts(); sent != 1 {
		t.Errorf("pumping counted %d sent, want 1", sent)
	}
}
