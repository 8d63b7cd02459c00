package sender_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"smsgw/internal/testenv"
	"smsgw/otp"
	"smsgw/sender"
	"smsgw/sender/fake"
)

// scripted answers every Send with err, after delay.
type scripted struct {
	err   error
	id    string // answered on success; default SCRIPTED1
	delay time.Duration
	calls atomic.Int64
}

func (s *scripted) Send(ctx context.Context, _, _ string) (string, error) {
	s.calls.Add(1)
	if s.delay > 0 {
		select {
		case <-time.After(s.delay):
		case <-ctx.Done():
			return "", &otp.SendError{Reason: "timeout", Err: ctx.Err()}
		}
	}
	if s.err != nil {
		return "", s.err
	}
	if s.id != "" {
		return s.id, nil
	}
	return "SCRIPTED1", nil
}

func refusing(f otp.Failure, reason string) *scripted {
	return &scripted{err: &otp.SendError{Failure: f, Reason: reason, Err: errors.New(reason)}}
}

func failing() *scripted {
	return &scripted{err: &otp.SendError{Failure: otp.ProviderDown, Reason: "provider_5xx", Err: errors.New("503")}}
}

func unsure() *scripted {
	return &scripted{err: &otp.SendError{Reason: "timeout", Err: context.DeadlineExceeded}}
}

func phone(t *testing.T, raw string) otp.Phone {
	t.Helper()
	p, err := otp.ParsePhone(raw, "")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func router(t *testing.T, o sender.Options, providers ...sender.Named) *sender.Router {
	t.Helper()
	r, err := sender.NewRouter(providers, o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestFailover(t *testing.T) {
	tests := []struct {
		name         string
		first        *scripted
		wantProvider string
		wantErr      bool
		wantBackup   int // texts the backup took
	}{
		{"a failing provider fails over", failing(), "backup", false, 1},
		{"a refused number fails over", refusing(otp.NumberProblem, "region_not_enabled"), "backup", false, 1},
		{"a refused text fails over", refusing(otp.ProviderRefused, "refused"), "backup", false, 1},
		{"an unknown outcome does not fail over", unsure(), "primary", true, 0},
		{"a bare error is an unknown outcome", &scripted{err: errors.New("boom")}, "primary", true, 0},
		{"STOP is respected everywhere", refusing(otp.OptedOut, "unsubscribed"), "primary", true, 0},
		// The type decides, not the words: a provider that spells STOP its
		// own way is still never failed over from.
		{"STOP spelled otherwise", refusing(otp.OptedOut, "recipient_opted_out"), "primary", true, 0},
		{"a number problem spelled unsubscribed", refusing(otp.NumberProblem, "unsubscribed"), "backup", false, 1},
		{"a slow provider times out, outcome unknown", &scripted{delay: time.Second}, "primary", true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			backup := fake.New(10, nil, nil)
			r := router(t, sender.Options{}, sender.Named{Name: "primary", Provider: tt.first}, sender.Named{Name: "backup", Provider: backup})
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			rec, err := r.Send(ctx, phone(t, "+14155552671"), "hi")
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v", err)
			}
			var se *otp.SendError
			if err != nil && (!errors.As(err, &se) || se.Provider != tt.wantProvider) {
				t.Fatalf("err = %#v, want from %s", err, tt.wantProvider)
			}
			if err == nil && (rec.Provider != tt.wantProvider || rec.MessageID == "") {
				t.Fatalf("receipt %+v", rec)
			}
			if n := len(backup.Messages("")); n != tt.wantBackup {
				t.Fatalf("backup took %d texts, want %d", n, tt.wantBackup)
			}
		})
	}
}

// A provider's message id reaches the audit trail only as text Postgres and
// logs take: no NUL, control or bidi characters, valid UTF-8, bounded.
func TestHostileMessageIDsAreCleaned(t *testing.T) {
	for _, id := range []string{"SM\x00DROP", "id\xff\xfe", "\x1b[2J", "\u202eevil", strings.Repeat("x", 10_000)} {
		t.Run(strconv.Quote(id[:min(len(id), 8)]), func(t *testing.T) {
			r := router(t, sender.Options{}, sender.Named{Name: "odd", Provider: &scripted{id: id}})
			rec, err := r.Send(context.Background(), phone(t, "+14155552671"), "hi")
			if err != nil {
				t.Fatal(err)
			}
			got := rec.MessageID
			if !utf8.ValidString(got) || strings.ContainsAny(got, "\x00\x1b\u202e") || len(got) > otp.MaxMessageID {
				t.Fatalf("message id %q", got)
			}
		})
	}
}

func TestAllRefuse(t *testing.T) {
	a, b := refusing(otp.ProviderRefused, "refused"), failing()
	_, err := router(t, sender.Options{}, sender.Named{Name: "a", Provider: a}, sender.Named{Name: "b", Provider: b}).
		Send(context.Background(), phone(t, "+14155552671"), "hi")
	var se *otp.SendError
	if !errors.As(err, &se) || !se.NotSent() || se.Provider != "b" || se.Reason != "provider_5xx" {
		t.Fatalf("err = %#v: want the last refusal, not sent", err)
	}
	if a.calls.Load() != 1 || b.calls.Load() != 1 {
		t.Fatalf("calls %d %d", a.calls.Load(), b.calls.Load())
	}
}

func TestBreakerOpensOnProviderFailuresOnly(t *testing.T) {
	reg := prometheus.NewRegistry()
	down, backup := failing(), fake.New(100, nil, nil)
	r := router(t, sender.Options{BreakerFailures: 3, BreakerOpenFor: 200 * time.Millisecond, Metrics: reg},
		sender.Named{Name: "down", Provider: down}, sender.Named{Name: "backup", Provider: backup})
	for i := 0; i < 10; i++ {
		if rec, err := r.Send(context.Background(), phone(t, "+14155552671"), "hi"); err != nil || rec.Provider != "backup" {
			t.Fatalf("send %d: %+v %v", i, rec, err)
		}
	}
	if n := down.calls.Load(); n != 3 {
		t.Fatalf("the failing provider was called %d times, want 3 before its breaker opened", n)
	}
	if got := testenv.Metric(t, reg, "smsgw_provider_breaker_state", "down"); got != 2 {
		t.Fatalf("breaker state metric %v, want 2 (open)", got)
	}
	// After open_for one text probes it again.
	time.Sleep(250 * time.Millisecond)
	r.Send(context.Background(), phone(t, "+14155552671"), "hi")
	if n := down.calls.Load(); n != 4 {
		t.Fatalf("calls after open_for: %d, want one probe", n)
	}

	// Number problems never open the breaker.
	picky := refusing(otp.NumberProblem, "invalid_number")
	r = router(t, sender.Options{BreakerFailures: 2}, sender.Named{Name: "picky", Provider: picky})
	for i := 0; i < 5; i++ {
		r.Send(context.Background(), phone(t, "+14155552671"), "hi")
	}
	if picky.calls.Load() != 5 {
		t.Fatalf("refused numbers opened the breaker: %d calls", picky.calls.Load())
	}
}

func TestRoutesByCountry(t *testing.T) {
	twilio, gw := fake.New(10, nil, nil), fake.New(10, nil, nil)
	r := router(t, sender.Options{Routes: map[string][]string{"GB": {"http", "twilio"}}},
		sender.Named{Name: "twilio", Provider: twilio}, sender.Named{Name: "http", Provider: gw})
	for _, tt := range []struct{ to, want string }{
		{"+447400123456", "http"},
		{"+14155552671", "twilio"},
		{"+4915123456789", "twilio"},
	} {
		rec, err := r.Send(context.Background(), phone(t, tt.to), "hi")
		if err != nil || rec.Provider != tt.want {
			t.Fatalf("%s: %+v %v, want %s", tt.to, rec, err, tt.want)
		}
	}
}

func TestRouterConfigErrors(t *testing.T) {
	p := sender.Named{Name: "twilio", Provider: fake.New(1, nil, nil)}
	for _, tt := range []struct {
		name      string
		providers []sender.Named
		routes    map[string][]string
		want      string
	}{
		{"none", nil, nil, "no provider"},
		{"twice", []sender.Named{p, p}, nil, "twice"},
		{"unknown provider in a route", []sender.Named{p}, map[string][]string{"GB": {"http"}}, "sender.routes.GB[0]"},
		{"bad country", []sender.Named{p}, map[string][]string{"gbr": {"twilio"}}, "sender.routes.gbr"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sender.NewRouter(tt.providers, sender.Options{Routes: tt.routes})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}
