package admission

import (
	"context"
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/codestore"
	"smsgw/internal/redisbatch"
	"smsgw/internal/testenv"
	"smsgw/otp"
	"smsgw/pumping"
	"smsgw/ratelimit"
)

// roundTrips counts what a client sends to Redis: one per command sent on
// its own, one per pipeline.
type roundTrips struct {
	trips, commands atomic.Int64
}

func (*roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.trips.Add(1)
		r.commands.Add(1)
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.trips.Add(1)
		r.commands.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

type fixture struct {
	rdb      *redis.Client
	prefix   string
	trips    *roundTrips
	limiter  *ratelimit.Limiter
	guard    *pumping.Guard
	codes    *codestore.Store
	idem     *codestore.Idempotency
	admitter *Admitter
}

// testCallTimeout bounds each script call in these tests. Nothing here
// tests a stalled Redis, and a loaded -race run with a Cluster's races
// queued behind two pipelines ran past the batcher's default second
// (TestClusterOneCallPerSlot, load 18, 27 Nov).
const testCallTimeout = 10 * time.Second

// newFixture builds the parts over a private key prefix, with the pumping
// configuration edit leaves (nil: the shipped defaults).
func newFixture(t *testing.T, edit func(*pumping.Config)) *fixture {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	f := &fixture{rdb: rdb, prefix: prefix, trips: &roundTrips{}}
	rdb.AddHook(f.trips)
	cfg := pumping.DefaultConfig()
	if edit != nil {
		edit(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	scripts := redisbatch.New(rdb, redisbatch.Options{Timeout: testCallTimeout})
	f.limiter = ratelimit.New(rdb, prefix, ratelimit.Options{Scripts: scripts})
	f.guard = pumping.New(rdb, prefix, cfg, pumping.Options{Scripts: scripts})
	f.codes = codestore.New(rdb, prefix, scripts)
	f.idem = codestore.NewIdempotency(rdb, prefix)
	f.admitter = New(scripts, f.limiter, f.guard, f.codes, f.idem)
	return f
}

func phone(t testing.TB, raw string) otp.Phone {
	t.Helper()
	p, err := otp.ParsePhone(raw, "")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// admission is a send to raw from ip, counted in a per-phone window of max
// sends an hour and in a shared one of 1000.
func (f *fixture) admission(t testing.TB, ticket, raw, ip string, max int) otp.Admission {
	t.Helper()
	p := phone(t, raw)
	return otp.Admission{Ticket: ticket, Phone: p, ClientIP: netip.MustParseAddr(ip), Pumping: true,
		Subjects: []otp.Subject{
			{Scope: "phone", Key: "phone:" + p.E164, Rules: []otp.Rule{{Window: time.Hour, Max: max}}},
			{Scope: "global", Key: "global", Rules: []otp.Rule{{Window: time.Hour, Max: 1000}}},
		},
		Code: otp.StoredCode{MAC: []byte("mac-" + ticket), Sealed: []byte("sealed-" + ticket)}, CodeTTL: 5 * time.Minute}
}

func (f *fixture) admit(t testing.TB, a otp.Admission) otp.Admitted {
	t.Helper()
	out, err := f.admitter.Admit(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// windowHolds is how many tickets the subject's windows hold.
func (f *fixture) windowHolds(t testing.TB, key string) int64 {
	t.Helper()
	n, err := f.rdb.ZCard(context.Background(), f.prefix+"rl:{"+key+"}").Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPumpingRefusalGivesTheWindowsBack(t *testing.T) {
	f := newFixture(t, func(c *pumping.Config) {
		c.Floors = map[string]int{pumping.RuleRange100: pumping.DefaultFloors()[pumping.RuleRange100]}
	})
	floor := pumping.DefaultFloors()[pumping.RuleRange100]
	var last otp.Admitted
	for i := 0; i <= floor; i++ {
		last = f.admit(t, f.admission(t, fmt.Sprintf("t%d", i), fmt.Sprintf("+4474001000%02d", i), fmt.Sprintf("198.51.%d.1", i), 10))
		if refused := last.Pumping.Refused != nil; refused != (i == floor) {
			t.Fatalf("send %d: refused %v, want %v", i, refused, i == floor)
		}
	}
	if last.Pumping.Refused.Rule != pumping.RuleRange100 || !last.Decision.Allowed || last.Issued {
		t.Fatalf("refusal %+v, decision allowed %v, issued %v", last.Pumping.Refused, last.Decision.Allowed, last.Issued)
	}
	if n := f.windowHolds(t, "global"); n != int64(floor) {
		t.Fatalf("the shared window holds %d tickets after a pumping refusal, want %d", n, floor)
	}
	if n := f.windowHolds(t, fmt.Sprintf("phone:+4474001000%02d", floor)); n != 0 {
		t.Fatalf("the refused phone's window holds %d tickets, want 0", n)
	}
	if _, pending, err := f.codes.Pending(context.Background(), fmt.Sprintf("+4474001000%02d", floor)); err != nil || pending {
		t.Fatalf("a refused send left a code (pending %v, err %v)", pending, err)
	}
}

func TestIdempotentClaim(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	first := f.admission(t, "t1", "+447400123456", "198.51.100.1", 5)
	first.Scope, first.ClaimTTL = otp.SendScope("+447400123456", "k1"), time.Minute
	if out := f.admit(t, first); out.Claim != otp.Claimed || !out.Issued {
		t.Fatalf("first: claim %v, issued %v", out.Claim, out.Issued)
	}
	for _, tc := range []struct {
		name   string
		settle []byte // the first request's answer; nil: still running
		want   otp.Claim
	}{
		{"while the first runs", nil, otp.ClaimBusy},
		{"once it answered", []byte(`{"request_id":"r1"}`), otp.ClaimDone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.settle != nil {
				if err := f.idem.Settle(ctx, first.Scope, first.Ticket, tc.settle, time.Minute); err != nil {
					t.Fatal(err)
				}
			}
			again := f.admission(t, "t2", "+447400123456", "198.51.100.1", 5)
			again.Scope, again.ClaimTTL = first.Scope, time.Minute
			out := f.admit(t, again)
			if out.Claim != tc.want || out.Limited || out.Issued || string(out.Prior) != string(tc.settle) {
				t.Fatalf("claim %v, limited %v, issued %v, prior %q", out.Claim, out.Limited, out.Issued, out.Prior)
			}
			if n := f.windowHolds(t, "phone:+447400123456"); n != 1 {
				t.Fatalf("the window holds %d tickets, want 1: a retry counts nothing", n)
			}
		})
	}
}

func TestResendKeepsTheCodeAndItsAttempts(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	first := f.admit(t, f.admission(t, "t1", "+447400123456", "198.51.100.1", 5))
	if !first.Issued || first.Pending != nil {
		t.Fatalf("first send: issued %v, pending %q", first.Issued, first.Pending)
	}
	if status, _, err := f.codes.Check(ctx, "+447400123456", []byte("wrong"), 5); err != nil || status != otp.CodeWrong {
		t.Fatalf("check: %v, %v", status, err)
	}
	again := f.admit(t, f.admission(t, "t2", "+447400123456", "198.51.100.1", 5))
	if string(again.Pending) != "sealed-t1" {
		t.Fatalf("resend: pending %q, want the first code's", again.Pending)
	}
	p, ok, err := f.codes.Pending(ctx, "+447400123456")
	if err != nil || !ok || p.Attempts != 1 {
		t.Fatalf("pending %+v, %v, %v; want the wrong attempt kept", p, ok, err)
	}
}

func TestAnAcceptedSendIsOneRoundTrip(t *testing.T) {
	f := newFixture(t, nil)
	// The first call loads the script (a NOSCRIPT costs a second trip).
	f.admit(t, f.admission(t, "warm", "+447400999999", "203.0.113.9", 5))
	f.trips.trips.Store(0)
	f.trips.commands.Store(0)
	a := f.admission(t, "t1", "+447400123456", "198.51.100.1", 5)
	a.Scope, a.ClaimTTL = otp.SendScope("+447400123456", "k1"), time.Minute
	out := f.admit(t, a)
	if out.Claim != otp.Claimed || !out.Decision.Allowed || out.Pumping.Refused != nil || !out.Issued {
		t.Fatalf("not accepted: %+v", out)
	}
	if trips, cmds := f.trips.trips.Load(), f.trips.commands.Load(); trips != 1 || cmds != 1 {
		t.Fatalf("an accepted send made %d round trips with %d commands, want 1 and 1", trips, cmds)
	}
}
