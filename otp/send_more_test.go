package otp_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"smsgw/otp"
)

func keyed(key string) otp.SendRequest {
	r := sendReq(phone)
	r.IdempotencyKey = key
	return r
}

func TestSendIdempotent(t *testing.T) {
	ctx := context.Background()
	t.Run("replay", func(t *testing.T) {
		w := newWorld(t)
		first, err := w.send(t, keyed("k1"))
		if err != nil {
			t.Fatal(err)
		}
		again, err := w.send(t, keyed("k1"))
		if err != nil || !again.Replayed || again.Reason != "idempotent_replay" || again.RequestID != first.RequestID ||
			again.Receipt != first.Receipt || again.Sending || !again.Limited {
			t.Fatalf("replay %+v, %v; first %+v", again, err, first)
		}
		if n := len(w.sender.Texts()); n != 1 {
			t.Fatalf("%d texts for one key", n)
		}
		if n := w.limiter.Used(otp.SendPhoneKey + phone); n != 1 {
			t.Fatalf("the replay counted: %d", n)
		}
	})
	t.Run("a refused send lets a retry run afresh", func(t *testing.T) {
		w := newWorld(t, provider(otp.ProviderRefused))
		if _, err := w.send(t, keyed("k2")); otp.ErrorCode(err) != otp.EProviderError {
			t.Fatal(err)
		}
		if w.idem.Held(otp.SendScope(phone, "k2")) {
			t.Fatal("a failed send kept its scope")
		}
	})
	t.Run("a held send still answers its replay", func(t *testing.T) {
		w := newWorld(t)
		if _, err := w.send(t, keyed("k3")); err != nil {
			t.Fatal(err)
		}
		w.pumping.HeldFn = func(otp.Phone, netip.Addr) (otp.PumpingRefusal, bool) { return rangeRule, true }
		if res, err := w.send(t, keyed("k3")); err != nil || !res.Replayed {
			t.Fatalf("%+v %v", res, err)
		}
		res, err := w.send(t, keyed("k4"))
		wantCode(t, err, otp.ERateLimited)
		if w.idem.Held(otp.SendScope(phone, "k4")) || res.Reason != "pumping:range_1k" {
			t.Fatalf("a refused key is kept, or %+v", res)
		}
	})
	t.Run("a busy claim waits for the answer", func(t *testing.T) {
		w := newWorld(t)
		if _, err := w.send(t, keyed("k5")); err != nil {
			t.Fatal(err)
		}
		claim, busy := w.idem.Claim, 2
		w.idem.ClaimFn = func(ctx context.Context, scope, ticket string, ttl time.Duration) (otp.Claim, []byte, error) {
			if busy > 0 {
				busy--
				return otp.ClaimBusy, nil, nil
			}
			w.idem.ClaimFn = nil
			return claim(ctx, scope, ticket, ttl)
		}
		if res, err := w.send(t, keyed("k5")); err != nil || !res.Replayed || busy != 0 {
			t.Fatalf("%+v %v", res, err)
		}
	})
	t.Run("a busy claim the client leaves", func(t *testing.T) {
		w := newWorld(t)
		w.idem.ClaimFn = func(context.Context, string, string, time.Duration) (otp.Claim, []byte, error) {
			return otp.ClaimBusy, nil, nil
		}
		ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		_, err := w.svc.Send(ctx, keyed("k6"))
		wantCode(t, err, otp.EUnavailable)
		nothingHeld(t, w, otp.SendResult{})
	})
	t.Run("idempotency store down", func(t *testing.T) {
		w := newWorld(t)
		w.idem.ClaimFn = func(context.Context, string, string, time.Duration) (otp.Claim, []byte, error) {
			return 0, nil, errDown
		}
		_, err := w.send(t, keyed("k8"))
		wantCode(t, err, otp.EUnavailable)
		nothingHeld(t, w, otp.SendResult{})
	})
	t.Run("a stored answer that does not read", func(t *testing.T) {
		w := newWorld(t)
		w.idem.ClaimFn = func(context.Context, string, string, time.Duration) (otp.Claim, []byte, error) {
			return otp.ClaimDone, []byte("{"), nil
		}
		if _, err := w.send(t, keyed("k9")); err == nil || !strings.Contains(err.Error(), "stored answer") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("an answer not stored is only logged", func(t *testing.T) {
		w := newWorld(t)
		w.idem.SettleFn = func(context.Context, string, string, []byte, time.Duration) error { return errDown }
		if _, err := w.send(t, keyed("k10")); err != nil {
			t.Fatal(err)
		}
	})
}

// TestResendKeepsAttempts: a send while a code is pending texts the same
// code, renewed, and keeps its wrong attempts, so a resend never buys more
// guesses.
func TestResendKeepsAttempts(t *testing.T) {
	ctx := context.Background()
	t.Run("resend", func(t *testing.T) {
		w := newWorld(t)
		code := w.sent(t)
		if _, err := w.svc.Verify(ctx, verifyReq(wrong(code))); otp.ErrorCode(err) != otp.EInvalidCode {
			t.Fatal(err)
		}
		res, err := w.send(t, sendReq(phone))
		if err != nil || res.Reason != "resend" {
			t.Fatalf("%+v %v", res, err)
		}
		if again := w.lastCode(t); again != code {
			t.Fatalf("resend texted %s, want the pending %s", again, code)
		}
		if p, _ := w.pending(t); p.Attempts != 1 {
			t.Fatalf("attempts %d after a resend, want 1", p.Attempts)
		}
		// A resend the provider refuses leaves the pending code alone.
		w.sender.SendFn = func(context.Context, otp.Phone, string) (otp.Receipt, error) {
			return otp.Receipt{}, &otp.SendError{Provider: "fake", Failure: otp.ProviderRefused, Reason: "refused"}
		}
		if _, err := w.send(t, sendReq(phone)); otp.ErrorCode(err) != otp.EProviderError {
			t.Fatal(err)
		}
		if _, ok := w.pending(t); !ok {
			t.Fatal("a refused resend discarded the pending code")
		}
	})
}

// TestSendOneStepAnswers covers what only an Admitter can answer.
func TestSendOneStepAnswers(t *testing.T) {
	for _, c := range []struct {
		name  string
		admit func(w *world) func(context.Context, otp.Admission) (otp.Admitted, error)
		key   string
		code  string
	}{
		{name: "down", code: otp.EUnavailable, admit: func(*world) func(context.Context, otp.Admission) (otp.Admitted, error) {
			return func(context.Context, otp.Admission) (otp.Admitted, error) { return otp.Admitted{}, errDown }
		}},
		{name: "down with a key", key: "k", code: otp.EUnavailable, admit: func(*world) func(context.Context, otp.Admission) (otp.Admitted, error) {
			return func(context.Context, otp.Admission) (otp.Admitted, error) { return otp.Admitted{}, errDown }
		}},
		{name: "no claim state", code: otp.EUnavailable, admit: func(*world) func(context.Context, otp.Admission) (otp.Admitted, error) {
			return func(context.Context, otp.Admission) (otp.Admitted, error) { return otp.Admitted{}, nil }
		}},
		{name: "no code issued", code: otp.EUnavailable, admit: func(w *world) func(context.Context, otp.Admission) (otp.Admitted, error) {
			return func(ctx context.Context, a otp.Admission) (otp.Admitted, error) {
				w.admit.AdmitFn = nil
				got, err := w.admit.Admit(ctx, a)
				got.Issued = false
				return got, err
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			w.admit.AdmitFn = c.admit(w)
			res, err := w.send(t, keyed(c.key))
			wantCode(t, err, c.code)
			if c.code == "" {
				texted(t, w, res)
				return
			}
			if c.key != "" && w.idem.Held(otp.SendScope(phone, c.key)) {
				t.Fatal("a failed send kept its scope")
			}
		})
	}
}
