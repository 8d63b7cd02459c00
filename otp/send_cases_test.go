package otp_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"smsgw/otp"
	"smsgw/otp/otptest"
)

func refused(scope string) otp.PumpingRefusal {
	r := rangeRule
	r.Scope, r.Rule = scope, scope+"_rule"
	return r
}

var sendCases = []sendCase{
	{name: "texted", check: texted},
	{name: "invalid phone", req: func(r *otp.SendRequest) { r.Phone = "not a number" }, code: otp.EInvalidPhone, check: nothingHeld},
	{name: "policy refusal", code: otp.EPhoneNotAllowed, reason: "country:US", check: nothingHeld,
		setup: []setup{func(c *otp.Config, _ *otp.Deps, _ *world) { c.Policy.DeniedCountries = []string{"US"} }}},
	{name: "override block", code: otp.EPhoneNotAllowed, reason: "override:block", check: nothingHeld,
		setup: []setup{overrides(otp.OverrideBlock)}},
	{name: "override allow skips the pumping rules", reason: "override:allow",
		setup: []setup{overrides(otp.OverrideAllow), held(rangeRule), refuseUnlessBypassed(rangeRule)},
		check: func(t *testing.T, w *world, res otp.SendResult) {
			if n := len(w.sender.Texts()); n != 1 {
				t.Fatalf("%d texts", n)
			}
			if reserved, _, _, _ := w.pumping.Counts(); reserved != 0 {
				t.Errorf("the guard reserved %d for an exempt send", reserved)
			}
		}},
	{name: "test number", req: func(r *otp.SendRequest) { r.Phone = testPhone }, reason: "test_number",
		check: func(t *testing.T, w *world, res otp.SendResult) {
			nothingHeld(t, w, res)
			if !res.Limited || !res.Decision.Allowed || len(res.Decision.Policies) != 2 || res.ExpiresIn != 10*time.Minute {
				t.Fatalf("result %+v", res)
			}
			if len(w.audit.Recorded()) != 0 || res.Sending {
				t.Fatal("a test number's send wrote a sending row")
			}
		}},
	{name: "windows refusal", code: otp.ERateLimited, reason: "phone:1m", check: nothingHeld,
		setup: []setup{func(c *otp.Config, _ *otp.Deps, _ *world) { c.PhoneRules = []otp.Rule{{Window: time.Minute, Max: 0}} }}},
	{name: "limiter down", code: otp.EUnavailable, check: nothingHeld,
		setup: []setup{func(_ *otp.Config, _ *otp.Deps, w *world) {
			w.limiter.AllowFn = func(context.Context, string, []otp.Subject) (otp.Decision, error) { return otp.Decision{}, errDown }
		}}},
	{name: "pumping held, no challenge", code: otp.ERateLimited, reason: "pumping:range_1k", setup: []setup{held(rangeRule)},
		check: func(t *testing.T, w *world, res otp.SendResult) {
			nothingHeld(t, w, res)
			if res.Refusal == nil || res.Refusal.Rule != "range_1k" || res.Limited {
				t.Fatalf("result %+v: the rule, not the windows, refused", res)
			}
		}},
	{name: "pumping refusal", code: otp.ERateLimited, reason: "pumping:range_1k", check: nothingHeld,
		setup: []setup{refuseUnlessBypassed(rangeRule)}},
	{name: "pumping down", code: otp.EUnavailable, check: nothingHeld,
		setup: []setup{func(_ *otp.Config, _ *otp.Deps, w *world) {
			w.pumping.ReserveFn = func(context.Context, otp.Phone, netip.Addr, bool) (otp.PumpingReservation, error) {
				return otp.PumpingReservation{}, errDown
			}
		}}},
	{name: "pumping shadow", reason: "shadow:pumping:range_1k", check: texted,
		setup: []setup{func(_ *otp.Config, _ *otp.Deps, w *world) {
			w.pumping.ReserveFn = func(context.Context, otp.Phone, netip.Addr, bool) (otp.PumpingReservation, error) {
				r := rangeRule
				return otp.PumpingReservation{Shadow: &r}, nil
			}
		}}},
	{name: "challenge asked", code: otp.EChallengeRequired, reason: "challenge_required:pumping:range_1k", check: nothingHeld,
		setup: []setup{refuseUnlessBypassed(rangeRule), withChallenge(nil)}},
	{name: "challenge asked from memory", code: otp.EChallengeRequired, reason: "challenge_required:pumping:range_1k",
		check: nothingHeld, setup: []setup{held(rangeRule), withChallenge(nil)}},
	{name: "challenge solved", reason: "challenge_passed", check: texted,
		req:   func(r *otp.SendRequest) { r.ChallengeToken = "solved" },
		setup: []setup{refuseUnlessBypassed(rangeRule), withChallenge(nil)}},
	{name: "challenge solved, held from memory", reason: "challenge_passed", check: texted,
		req:   func(r *otp.SendRequest) { r.ChallengeToken = "solved" },
		setup: []setup{held(rangeRule), refuseUnlessBypassed(rangeRule), withChallenge(nil)}},
	{name: "challenge rejected", code: otp.EChallengeRequired, reason: "challenge_required:pumping:range_1k", check: nothingHeld,
		req: func(r *otp.SendRequest) { r.ChallengeToken = "forged" },
		setup: []setup{refuseUnlessBypassed(rangeRule), withChallenge(func(context.Context, string, netip.Addr) error {
			return &otp.ChallengeRejected{Codes: []string{"invalid-input-response"}}
		})}},
	{name: "challenge verifier down", code: otp.EUnavailable, check: nothingHeld,
		req: func(r *otp.SendRequest) { r.ChallengeToken = "solved" },
		setup: []setup{refuseUnlessBypassed(rangeRule), withChallenge(func(context.Context, string, netip.Addr) error {
			return errDown
		})}},
	{name: "spend ceiling is no challenge", code: otp.ERateLimited, reason: "pumping:spend_rule", check: nothingHeld,
		req:   func(r *otp.SendRequest) { r.ChallengeToken = "solved" },
		setup: []setup{refuseUnlessBypassed(refused("spend")), withChallenge(nil)}},
	{name: "ceiling refuses a solved challenge", code: otp.ERateLimited, reason: "pumping:spend_rule", check: nothingHeld,
		req: func(r *otp.SendRequest) { r.ChallengeToken = "solved" },
		setup: []setup{withChallenge(nil), func(_ *otp.Config, _ *otp.Deps, w *world) {
			w.pumping.ReserveFn = func(_ context.Context, _ otp.Phone, _ netip.Addr, bypass bool) (otp.PumpingReservation, error) {
				r := refused("spend")
				if !bypass {
					r = rangeRule
				}
				return otp.PumpingReservation{Refused: &r}, nil
			}
		}}},
	{name: "provider refused: quota and code given back", code: otp.EProviderError, reason: "refused",
		setup: []setup{provider(otp.ProviderRefused)},
		check: func(t *testing.T, w *world, res otp.SendResult) {
			if n := w.limiter.Used(otp.SendPhoneKey + phone); n != 0 {
				t.Errorf("phone window holds %d after a refused text", n)
			}
			if _, ok := w.pending(t); ok {
				t.Error("the unsent code is still pending")
			}
			if reserved, released, _, _ := w.pumping.Counts(); reserved != 1 || released != 1 {
				t.Errorf("pumping reserved %d, released %d", reserved, released)
			}
			if res.Receipt.Provider != "fake" || !res.Sending {
				t.Fatalf("result %+v", res)
			}
		}},
	{name: "outcome unknown: quota and code kept", code: otp.EProviderError, reason: "timeout",
		setup: []setup{provider(otp.OutcomeUnknown)},
		check: func(t *testing.T, w *world, res otp.SendResult) {
			if n := w.limiter.Used(otp.SendPhoneKey + phone); n != 1 {
				t.Errorf("phone window holds %d; the text may have gone out", n)
			}
			if _, ok := w.pending(t); !ok {
				t.Error("the code that may have been texted was discarded")
			}
		}},
	{name: "an unclassified provider error is an unknown outcome", code: otp.EProviderError, reason: "error",
		setup: []setup{func(_ *otp.Config, _ *otp.Deps, w *world) {
			w.sender.SendFn = func(context.Context, otp.Phone, string) (otp.Receipt, error) { return otp.Receipt{}, errDown }
		}},
		check: func(t *testing.T, w *world, _ otp.SendResult) {
			if n := w.limiter.Used(otp.SendPhoneKey + phone); n != 1 {
				t.Errorf("phone window holds %d", n)
			}
		}},
	{name: "give-backs that fail are only logged", code: otp.EProviderError, reason: "refused",
		setup: []setup{provider(otp.ProviderRefused), func(_ *otp.Config, _ *otp.Deps, w *world) {
			w.limiter.RefundFn = func(context.Context, string, []otp.Subject) error { return errDown }
			w.pumping.ReleaseFn = func(context.Context, otp.PumpingReservation) error { return errDown }
			w.codes.DiscardFn = func(context.Context, string, []byte) error { return errDown }
		}}},
	{name: "audit log not accepting: refused before anything", code: otp.EUnavailable, reason: otp.ReasonAudit,
		setup: []setup{func(_ *otp.Config, _ *otp.Deps, w *world) {
			w.audit.AcceptingFn = func() error { return errDown }
		}},
		check: func(t *testing.T, w *world, res otp.SendResult) {
			nothingHeld(t, w, res)
			if len(w.audit.Recorded()) != 0 || res.Sending || res.Phone.E164 != "" {
				t.Fatalf("the flow went on: %+v", res)
			}
		}},
	{name: "audit failure: nothing texted", code: otp.EUnavailable, reason: otp.ReasonAudit,
		setup: []setup{func(_ *otp.Config, _ *otp.Deps, w *world) {
			w.audit.RecordFn = func(context.Context, otp.AuditEvent) error { return errDown }
		}},
		check: func(t *testing.T, w *world, res otp.SendResult) {
			nothingHeld(t, w, res)
			if len(w.audit.Recorded()) != 1 || !res.Sending {
				t.Fatalf("the row was not handed to the log: %+v", res)
			}
		}},
	{name: "audit failure, failed discard", code: otp.EUnavailable, reason: otp.ReasonAudit,
		setup: []setup{func(_ *otp.Config, _ *otp.Deps, w *world) {
			w.audit.RecordFn = func(context.Context, otp.AuditEvent) error { return errDown }
			w.codes.DiscardFn = func(context.Context, string, []byte) error { return errDown }
		}}},
	{name: "code store down", code: otp.EUnavailable, check: nothingHeld,
		setup: []setup{func(_ *otp.Config, _ *otp.Deps, w *world) {
			w.codes.IssueFn = func(context.Context, string, otp.StoredCode, time.Duration) ([]byte, error) { return nil, errDown }
		}}},
	{name: "a code sealed under another secret is replaced", reason: "",
		setup: []setup{func(_ *otp.Config, _ *otp.Deps, w *world) {
			w.codes.Put(phone, otp.StoredCode{MAC: []byte("old"), Sealed: []byte("sealed under another secret")}, 2)
		}},
		check: func(t *testing.T, w *world, res otp.SendResult) {
			p, ok := w.pending(t)
			if !ok || p.Attempts != 2 {
				t.Fatalf("pending %+v %v: the attempts were not kept", p, ok)
			}
			if _, err := w.svc.Verify(context.Background(), verifyReq(w.lastCode(t))); err != nil {
				t.Fatalf("the texted code does not verify: %v", err)
			}
		}},
	{name: "replacing a code sealed under another secret fails", code: otp.EUnavailable, check: nothingHeld,
		setup: []setup{func(_ *otp.Config, _ *otp.Deps, w *world) {
			w.codes.Put(phone, otp.StoredCode{MAC: []byte("old"), Sealed: []byte("x")}, 0)
			w.codes.ReplaceFn = func(context.Context, string, otp.StoredCode, time.Duration) error {
				w.codes.DiscardFn = nil
				_ = w.codes.Discard(context.Background(), phone, []byte("old"))
				return errDown
			}
		}}},
}

func overrides(action otp.OverrideAction) setup {
	return func(_ *otp.Config, d *otp.Deps, _ *world) {
		d.Overrides = otptest.Overrides{"+1415555": {Action: action}}
	}
}

func held(r otp.PumpingRefusal) setup {
	return func(_ *otp.Config, _ *otp.Deps, w *world) {
		w.pumping.HeldFn = func(otp.Phone, netip.Addr) (otp.PumpingRefusal, bool) { return r, true }
	}
}

func provider(f otp.Failure) setup {
	reason := map[otp.Failure]string{otp.ProviderRefused: "refused", otp.OutcomeUnknown: "timeout"}[f]
	return func(_ *otp.Config, _ *otp.Deps, w *world) {
		w.sender.SendFn = func(context.Context, otp.Phone, string) (otp.Receipt, error) {
			return otp.Receipt{}, &otp.SendError{Provider: "fake", Failure: f, Reason: reason, Err: errDown}
		}
	}
}

func TestSend(t *testing.T) {
	for _, c := range sendCases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, c.setup...)
			req := sendReq(phone)
			if c.req != nil {
				c.req(&req)
			}
			res, err := w.send(t, req)
			wantCode(t, err, c.code)
			if res.Reason != c.reason {
				t.Errorf("reason %q, want %q", res.Reason, c.reason)
			}
			if c.check != nil {
				c.check(t, w, res)
			}
		})
	}
}
