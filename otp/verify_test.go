package otp_test

import (
	"context"
	"testing"
	"time"

	"smsgw/otp"
)

func verifyReq(code string) otp.VerifyRequest {
	return otp.VerifyRequest{Ticket: sendReq(phone).Ticket, Phone: phone, Code: code, ClientIP: client}
}

// sent texts a code to phone and returns it.
func (w *world) sent(t *testing.T) string {
	t.Helper()
	if _, err := w.send(t, sendReq(phone)); err != nil {
		t.Fatal(err)
	}
	return w.lastCode(t)
}

func wrong(code string) string {
	if code[0] == '9' {
		return "0" + code[1:]
	}
	return string(code[0]+1) + code[1:]
}

func TestVerify(t *testing.T) {
	ctx := context.Background()
	t.Run("approved once, credited to the guard", func(t *testing.T) {
		w := newWorld(t)
		code := w.sent(t)
		if _, err := w.svc.Verify(ctx, verifyReq(code[:3]+" "+code[3:])); err != nil {
			t.Fatal(err)
		}
		if _, _, _, approved := w.pumping.Counts(); approved != 1 {
			t.Errorf("%d approvals credited", approved)
		}
		_, err := w.svc.Verify(ctx, verifyReq(code))
		wantCode(t, err, otp.ENoPendingCode)
	})
	t.Run("an approval the guard cannot count still approves", func(t *testing.T) {
		w := newWorld(t, func(_ *otp.Config, _ *otp.Deps, w *world) {
			w.pumping.ApprovedFn = func(context.Context, otp.Phone) error { return errDown }
		})
		if _, err := w.svc.Verify(ctx, verifyReq(w.sent(t))); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("wrong codes count down to a lockout", func(t *testing.T) {
		w := newWorld(t)
		code := w.sent(t)
		for left := 2; left >= 0; left-- {
			res, err := w.svc.Verify(ctx, verifyReq(wrong(code)))
			wantCode(t, err, otp.EInvalidCode)
			want := "attempts_left:" + string(rune('0'+left))
			if left == 0 {
				want = "locked_out"
			}
			if res.AttemptsLeft != left || res.Reason != want || !res.Limited {
				t.Fatalf("result %+v, want %d left (%s)", res, left, want)
			}
		}
		_, err := w.svc.Verify(ctx, verifyReq(code))
		wantCode(t, err, otp.ENoPendingCode)
	})
	t.Run("test number", func(t *testing.T) {
		w := newWorld(t)
		req := verifyReq(testCode)
		req.Phone = testPhone
		if res, err := w.svc.Verify(ctx, req); err != nil || res.Reason != "test_number" {
			t.Fatalf("%+v %v", res, err)
		}
		req.Code = wrong(testCode)
		res, err := w.svc.Verify(ctx, req)
		wantCode(t, err, otp.EInvalidCode)
		if res.AttemptsLeft != 3 || res.Reason != "test_number" {
			t.Fatalf("result %+v: a test number's wrong code counts no attempt", res)
		}
	})
	for _, c := range []struct {
		name, code, phone, want string
		setup                   setup
	}{
		{name: "code too long", code: "1234567890123456789012345678901234", want: otp.EInvalidRequest},
		{name: "code not digits", code: "12a456", want: otp.EInvalidRequest},
		{name: "code empty", code: " - ", want: otp.EInvalidRequest},
		{name: "invalid phone", code: "123456", phone: "x", want: otp.EInvalidPhone},
		{name: "nothing pending", code: "123456", want: otp.ENoPendingCode},
		{name: "limiter down", code: "123456", want: otp.EUnavailable, setup: func(_ *otp.Config, _ *otp.Deps, w *world) {
			w.limiter.AllowFn = func(context.Context, string, []otp.Subject) (otp.Decision, error) { return otp.Decision{}, errDown }
		}},
		{name: "audit log not accepting", code: "123456", want: otp.EUnavailable, setup: func(_ *otp.Config, _ *otp.Deps, w *world) {
			w.audit.AcceptingFn = func() error { return errDown }
			w.limiter.AllowFn = func(context.Context, string, []otp.Subject) (otp.Decision, error) {
				panic("a verify asked the limiter while no row could be made durable")
			}
		}},
		{name: "limited", code: "123456", want: otp.ERateLimited, setup: func(c *otp.Config, _ *otp.Deps, _ *world) {
			c.VerifyIPRules = []otp.Rule{{Window: time.Minute, Max: 0}}
		}},
		{name: "code store down", code: "123456", want: otp.EUnavailable, setup: func(_ *otp.Config, _ *otp.Deps, w *world) {
			w.codes.CheckFn = func(context.Context, string, []byte, int) (otp.CodeCheck, int, error) { return 0, 0, errDown }
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var edits []setup
			if c.setup != nil {
				edits = append(edits, c.setup)
			}
			w := newWorld(t, edits...)
			req := verifyReq(c.code)
			if c.phone != "" {
				req.Phone = c.phone
			}
			_, err := w.svc.Verify(ctx, req)
			wantCode(t, err, c.want)
		})
	}
}
