package admission_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"smsgw/admission"
	"smsgw/otp"
	"smsgw/otp/otptest"
)

// TestInTurn: the parts asked one by one stop at the first refusal and hold
// nothing after it but the claim.
func TestInTurn(t *testing.T) {
	ctx := context.Background()
	p, err := otp.ParsePhone("+14155552671", "")
	if err != nil {
		t.Fatal(err)
	}
	subjects := []otp.Subject{{Scope: "phone", Key: "send:phone:" + p.E164, Rules: []otp.Rule{{Window: time.Minute, Max: 1}}}}
	adm := func(ticket, scope string) otp.Admission {
		return otp.Admission{Ticket: ticket, Phone: p, Scope: scope, ClaimTTL: time.Minute, Subjects: subjects, Pumping: true,
			Code: otp.StoredCode{MAC: []byte(ticket)}, CodeTTL: time.Minute}
	}
	parts := func() (admission.InTurn, *otptest.Limiter, *otptest.Pumping, *otptest.Codes) {
		l, g, c := &otptest.Limiter{}, &otptest.Pumping{}, &otptest.Codes{}
		return admission.InTurn{Limiter: l, Pumping: g, Codes: c, Idempotency: &otptest.Idempotency{}}, l, g, c
	}

	a, l, g, _ := parts()
	if got, err := a.Admit(ctx, adm("t1", "s")); err != nil || got.Claim != otp.Claimed || !got.Issued || got.Pending != nil {
		t.Fatalf("first send: %+v, %v", got, err)
	}
	if got, err := a.Admit(ctx, adm("t2", "s")); err != nil || got.Claim != otp.ClaimBusy || got.Limited {
		t.Fatalf("a second request on a held scope: %+v, %v", got, err)
	}
	if got, err := a.Admit(ctx, adm("t3", "")); err != nil || !got.Limited || got.Decision.Allowed || got.Issued {
		t.Fatalf("past the window: %+v, %v", got, err)
	}
	if reserved, _, _, _ := g.Counts(); reserved != 1 || l.Used(subjects[0].Key) != 1 {
		t.Fatalf("reserved %d, window %d; want 1 and 1", reserved, l.Used(subjects[0].Key))
	}

	a, l, g, _ = parts()
	g.ReserveFn = func(context.Context, otp.Phone, netip.Addr, bool) (otp.PumpingReservation, error) {
		return otp.PumpingReservation{Refused: &otp.PumpingRefusal{Rule: "range_1k"}}, nil
	}
	if got, err := a.Admit(ctx, adm("t4", "")); err != nil || got.Pumping.Refused == nil || got.Issued || l.Used(subjects[0].Key) != 0 {
		t.Fatalf("a pumping refusal: %+v, %v; window %d, want 0", got, err, l.Used(subjects[0].Key))
	}

	a, l, g, c := parts()
	c.IssueFn = func(context.Context, string, otp.StoredCode, time.Duration) ([]byte, error) {
		return nil, errors.New("down")
	}
	if _, err := a.Admit(ctx, adm("t5", "")); err == nil || l.Used(subjects[0].Key) != 0 {
		t.Fatalf("a code store down: %v; window %d, want 0", err, l.Used(subjects[0].Key))
	}
	if reserved, released, _, _ := g.Counts(); reserved != released {
		t.Fatalf("reserved %d, released %d", reserved, released)
	}
}
