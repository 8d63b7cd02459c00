package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/internal/redisbatch"
	"smsgw/internal/redistopo"
	"smsgw/internal/testenv"
	"smsgw/otp"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func newTestLimiter(t *testing.T, be backend) (*Limiter, redis.UniversalClient, *testenv.Clock) {
	t.Helper()
	rdb, prefix := be(t)
	clock := testenv.NewClock(t0)
	l := New(rdb, prefix, Options{})
	l.now = clock.Now
	return l, rdb, clock
}

var (
	ipRules    = []otp.Rule{{Window: time.Minute, Max: 5}, {Window: 10 * time.Minute, Max: 30}, {Window: time.Hour, Max: 50}}
	phoneRules = []otp.Rule{{Window: time.Minute, Max: 1}, {Window: 10 * time.Minute, Max: 5}, {Window: time.Hour, Max: 10}}
)

func phone(n string) otp.Subject {
	return otp.Subject{Scope: "phone", Key: "phone:" + n, Rules: phoneRules}
}
func ip(a string) otp.Subject { return otp.Subject{Scope: "ip", Key: "ip:" + a, Rules: ipRules} }

var ticketSeq atomic.Int64

func ticket() string { return fmt.Sprintf("t%d", ticketSeq.Add(1)) }

func testAllowSequences(t *testing.T, be backend) {
	type step struct {
		at       time.Duration // since t0
		subjects []otp.Subject
		allowed  bool
		retry    time.Duration // exact, when refused
		tight    string        // policy of the tightest window, e.g. "phone-1m"
		used     int
		reset    time.Duration
	}
	a, b := phone("+14155550100"), phone("+14155550101")
	x := ip("203.0.113.7")
	tests := []struct {
		name  string
		steps []step
	}{
		{"first request is admitted and reports the tightest window", []step{
			{at: 0, subjects: []otp.Subject{a, x}, allowed: true, tight: "phone-1m", used: 1, reset: time.Minute},
		}},
		{"second within a minute is refused until the first leaves", []step{
			{at: 0, subjects: []otp.Subject{a, x}, allowed: true, tight: "phone-1m", used: 1, reset: time.Minute},
			{at: 17 * time.Second, subjects: []otp.Subject{a, x}, allowed: false, retry: 43 * time.Second, tight: "phone-1m", used: 1, reset: 43 * time.Second},
		}},
		{"an entry exactly one window old is out", []step{
			{at: 0, subjects: []otp.Subject{a}, allowed: true, tight: "phone-1m", used: 1, reset: time.Minute},
			{at: time.Minute - time.Microsecond, subjects: []otp.Subject{a}, allowed: false, retry: time.Microsecond, tight: "phone-1m", used: 1, reset: time.Microsecond},
			{at: time.Minute, subjects: []otp.Subject{a}, allowed: true, tight: "phone-1m", used: 1, reset: time.Minute},
		}},
		{"refused requests consume nothing", []step{
			{at: 0, subjects: []otp.Subject{a}, allowed: true, tight: "phone-1m", used: 1, reset: time.Minute},
			{at: time.Second, subjects: []otp.Subject{a}, allowed: false, retry: 59 * time.Second, tight: "phone-1m", used: 1, reset: 59 * time.Second},
			{at: 2 * time.Second, subjects: []otp.Subject{a}, allowed: false, retry: 58 * time.Second, tight: "phone-1m", used: 1, reset: 58 * time.Second},
			{at: time.Minute, subjects: []otp.Subject{a}, allowed: true, tight: "phone-1m", used: 1, reset: time.Minute},
		}},
		{"a refusal by one subject records nothing in the other", []step{
			{at: 0, subjects: []otp.Subject{a, x}, allowed: true, tight: "phone-1m", used: 1, reset: time.Minute},
			{at: time.Second, subjects: []otp.Subject{a, x}, allowed: false, retry: 59 * time.Second, tight: "phone-1m", used: 1, reset: 59 * time.Second},
			// x holds one entry, not two: the fourth admission leaves 1 of 5.
			{at: 2 * time.Second, subjects: []otp.Subject{b, x}, allowed: true, tight: "phone-1m", used: 1, reset: time.Minute},
			{at: 3 * time.Second, subjects: []otp.Subject{phone("+14155550102"), x}, allowed: true, tight: "phone-1m", used: 1, reset: time.Minute},
			{at: 4 * time.Second, subjects: []otp.Subject{x}, allowed: true, tight: "ip-1m", used: 4, reset: 56 * time.Second},
		}},
		{"the longer windows fill up: retry waits for the 10m window", []step{
			{at: 0, subjects: []otp.Subject{a}, allowed: true, tight: "phone-1m", used: 1, reset: time.Minute},
			{at: 1 * time.Minute, subjects: []otp.Subject{a}, allowed: true, tight: "phone-1m", used: 1, reset: time.Minute},
			{at: 2 * time.Minute, subjects: []otp.Subject{a}, allowed: true, tight: "phone-1m", used: 1, reset: time.Minute},
			{at: 3 * time.Minute, subjects: []otp.Subject{a}, allowed: true, tight: "phone-1m", used: 1, reset: time.Minute},
			// Fifth in 10 minutes: 1m and 10m both have 0 left; the tie goes to 10m.
			{at: 4 * time.Minute, subjects: []otp.Subject{a}, allowed: true, tight: "phone-10m", used: 5, reset: 6 * time.Minute},
			{at: 5 * time.Minute, subjects: []otp.Subject{a}, allowed: false, retry: 5 * time.Minute, tight: "phone-10m", used: 5, reset: 5 * time.Minute},
			{at: 10 * time.Minute, subjects: []otp.Subject{a}, allowed: true, tight: "phone-10m", used: 5, reset: time.Minute},
		}},
		{"retry is the max over all full windows of all subjects", []step{
			{at: 0, subjects: []otp.Subject{a, x}, allowed: true, tight: "phone-1m", used: 1, reset: time.Minute},
			{at: 10 * time.Second, subjects: []otp.Subject{phone("+14155550111"), x}, allowed: true, tight: "phone-1m", used: 1, reset: time.Minute},
			{at: 20 * time.Second, subjects: []otp.Subject{phone("+14155550112"), x}, allowed: true, tight: "phone-1m", used: 1, reset: time.Minute},
			{at: 30 * time.Second, subjects: []otp.Subject{phone("+14155550113"), x}, allowed: true, tight: "phone-1m", used: 1, reset: time.Minute},
			{at: 40 * time.Second, subjects: []otp.Subject{phone("+14155550114"), x}, allowed: true, tight: "phone-1m", used: 1, reset: time.Minute},
			// x is full until 60s (its oldest entry leaves); a is full until 60s too;
			// at 45s: phone wait 15s, ip wait 15s -> tie keeps the first.
			{at: 45 * time.Second, subjects: []otp.Subject{a, x}, allowed: false, retry: 15 * time.Second, tight: "phone-1m", used: 1, reset: 15 * time.Second},
			// b is free, x is full until its oldest (t=0) leaves at 60s.
			{at: 50 * time.Second, subjects: []otp.Subject{b, x}, allowed: false, retry: 10 * time.Second, tight: "ip-1m", used: 5, reset: 10 * time.Second},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, _, clock := newTestLimiter(t, be)
			ctx := context.Background()
			for i, s := range tt.steps {
				clock.Set(t0.Add(s.at))
				d, err := l.Allow(ctx, ticket(), s.subjects)
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if d.Allowed != s.allowed {
					t.Fatalf("step %d: allowed = %v, want %v (decision %+v)", i, d.Allowed, s.allowed, d)
				}
				if d.RetryAfter != s.retry {
					t.Errorf("step %d: retry = %v, want %v", i, d.RetryAfter, s.retry)
				}
				if got := d.Tightest.Policy(); got != s.tight {
					t.Errorf("step %d: tightest = %s, want %s", i, got, s.tight)
				}
				if d.Tightest.Used != s.used || d.Tightest.Reset != s.reset {
					t.Errorf("step %d: used/reset = %d/%v, want %d/%v", i, d.Tightest.Used, d.Tightest.Reset, s.used, s.reset)
				}
				if !d.Now.Equal(t0.Add(s.at)) {
					t.Errorf("step %d: now = %v, want the test clock", i, d.Now)
				}
			}
		})
	}
}

func TestRetryAfterSecondsRoundsUp(t *testing.T) {
	for _, tt := range []struct {
		retry time.Duration
		want  int64
	}{
		{time.Microsecond, 1},
		{time.Second, 1},
		{time.Second + time.Microsecond, 2},
		{43 * time.Second, 43},
		{59*time.Second + 999999*time.Microsecond, 60},
	} {
		t.Run(tt.retry.String(), func(t *testing.T) {
			if got := (otp.Decision{RetryAfter: tt.retry}).RetryAfterSeconds(); got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}

func testSameMicrosecondRequestsBothCount(t *testing.T, be backend) {
	l, _, _ := newTestLimiter(t, be) // the clock stands still
	s := otp.Subject{Scope: "ip", Key: "ip:198.51.100.1", Rules: []otp.Rule{{Window: time.Minute, Max: 2}}}
	ctx := context.Background()
	for i, want := range []bool{true, true, false} {
		d, err := l.Allow(ctx, ticket(), []otp.Subject{s})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed != want {
			t.Fatalf("request %d: allowed = %v, want %v", i, d.Allowed, want)
		}
	}
}

func testRefundGivesQuotaBackEverywhere(t *testing.T, be backend) {
	l, rdb, clock := newTestLimiter(t, be)
	ctx := context.Background()
	a, x := phone("+447700900123"), ip("192.0.2.9")
	tk := ticket()
	if d, err := l.Allow(ctx, tk, []otp.Subject{a, x}); err != nil || !d.Allowed {
		t.Fatalf("first: %+v %v", d, err)
	}
	for _, key := range []string{l.key(a), l.key(x)} {
		if n := rdb.ZCard(ctx, key).Val(); n != 1 {
			t.Fatalf("%s holds %d entries before the refund, want 1", key, n)
		}
	}
	if err := l.Refund(ctx, tk, []otp.Subject{a, x}); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{l.key(a), l.key(x)} {
		if n := rdb.ZCard(ctx, key).Val(); n != 0 {
			t.Fatalf("%s holds %d entries after the refund, want 0", key, n)
		}
	}
	// Refunding twice is harmless; the quota is back.
	if err := l.Refund(ctx, tk, []otp.Subject{a, x}); err != nil {
		t.Fatal(err)
	}
	clock.Set(t0.Add(time.Second))
	if d, err := l.Allow(ctx, ticket(), []otp.Subject{a, x}); err != nil || !d.Allowed {
		t.Fatalf("after refund: %+v %v", d, err)
	}
}

func testKeysExpireAfterTheLongestWindow(t *testing.T, be backend) {
	l, rdb, _ := newTestLimiter(t, be)
	ctx := context.Background()
	a := phone("+14155550100")
	if _, err := l.Allow(ctx, ticket(), []otp.Subject{a}); err != nil {
		t.Fatal(err)
	}
	ttl := rdb.PTTL(ctx, l.key(a)).Val()
	if ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("PTTL = %v, want just under 1h", ttl)
	}
}

// The flush is a redis-server of the test's own: a SCRIPT FLUSH on the
// shared Redis would fail other packages' processes running meanwhile.
func TestRecoversFromScriptFlush(t *testing.T) {
	l, rdb, clock := newTestLimiter(t, func(t *testing.T) (redis.UniversalClient, string) {
		rdb := redistopo.StartSingle(t).Client()
		t.Cleanup(func() { rdb.Close() })
		return rdb, "test:"
	})
	ctx := context.Background()
	x := ip("192.0.2.10")
	for i := 0; i < 3; i++ {
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		clock.Set(t0.Add(time.Duration(i) * time.Second))
		d, err := l.Allow(ctx, ticket(), []otp.Subject{x})
		if err != nil {
			t.Fatalf("after SCRIPT FLUSH: %v", err)
		}
		if !d.Allowed || d.Tightest.Used != i+1 {
			t.Fatalf("after SCRIPT FLUSH %d: %+v", i, d)
		}
	}
}

func TestRedisDownIsAnError(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer rdb.Close()
	l := New(rdb, "x:", Options{})
	start := time.Now()
	_, err := l.Allow(context.Background(), ticket(), []otp.Subject{ip("192.0.2.1")})
	if err == nil {
		t.Fatal("Allow succeeded with no Redis")
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("took %v to fail", el)
	}
}

func TestUsesRedisClock(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	l := New(rdb, prefix, Options{})
	d, err := l.Allow(context.Background(), ticket(), []otp.Subject{ip("192.0.2.2")})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	if skew := rt.Sub(d.Now); skew < 0 || skew > time.Second {
		t.Fatalf("decision clock %v is not Redis TIME %v", d.Now, rt)
	}
}

// TestRacesAdmitExactlyTheLimit races real goroutines on real Redis.
func testRacesAdmitExactlyTheLimit(t *testing.T, be backend) {
	tests := []struct {
		name     string
		subjects func(i int) []otp.Subject
		want     int
	}{
		{"one phone, many IPs", func(i int) []otp.Subject {
			return []otp.Subject{phone("+14155550100"), ip(fmt.Sprintf("10.0.%d.%d", i/250, i%250))}
		}, 1},
		{"one IP, many phones", func(i int) []otp.Subject {
			return []otp.Subject{phone(fmt.Sprintf("+1415555%04d", i)), ip("203.0.113.50")}
		}, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rdb, prefix := be(t)
			l := New(rdb, prefix, Options{})
			got := testenv.Race(t, 100, func(i int) string {
				d, err := l.Allow(context.Background(), ticket(), tt.subjects(i))
				return outcome(t, d, err)
			})
			if got["admitted"] != tt.want {
				t.Fatalf("admitted %d of 100, want exactly %d", got["admitted"], tt.want)
			}
		})
	}
}

// model is the plain in-memory reference for exact sliding windows.
type model struct{ entries map[string][]int64 } // admission times, microseconds

type modelResult struct {
	allowed bool
	retry   int64
	tight   int // index over all windows in order
	used    int
	reset   int64
}

func (m *model) allow(now int64, subjects []otp.Subject) modelResult {
	type win struct {
		key  string
		w    int64
		max  int
		used int
	}
	var wins []win
	for _, s := range subjects {
		for _, r := range s.Rules {
			w := r.Window.Microseconds()
			n := 0
			for _, e := range m.entries[s.Key] {
				if e > now-w {
					n++
				}
			}
			wins = append(wins, win{s.Key, w, r.Max, n})
		}
	}
	inWindow := func(key string, w int64) []int64 {
		var out []int64
		for _, e := range m.entries[key] {
			if e > now-w {
				out = append(out, e)
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
		return out
	}
	res := modelResult{tight: -1}
	for k, w := range wins {
		if w.used >= w.max {
			es := inWindow(w.key, w.w)
			wait := es[w.used-w.max] + w.w - now
			if wait > res.retry {
				res.retry, res.tight, res.used = wait, k, w.used
			}
		}
	}
	if res.tight >= 0 {
		res.reset = res.retry
		return res
	}
	for _, s := range subjects {
		m.entries[s.Key] = append(m.entries[s.Key], now)
	}
	res.allowed = true
	least := 0
	for k := range wins {
		wins[k].used++
		room := wins[k].max - wins[k].used
		if res.tight < 0 || room < least || (room == least && wins[k].w > wins[res.tight].w) {
			least, res.tight = room, k
		}
	}
	tw := wins[res.tight]
	res.used = tw.used
	res.reset = inWindow(tw.key, tw.w)[0] + tw.w - now
	return res
}

// TestMatchesReferenceModel drives the limiter and the model with the same
// random traffic and requires identical answers at every step.
func testMatchesReferenceModel(t *testing.T, be backend) {
	l, _, clock := newTestLimiter(t, be)
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	pool := modelSubjects()
	m := &model{entries: map[string][]int64{}}
	now := t0.UnixMicro()
	ctx := context.Background()
	admitted := 0
	const steps = 3000
	for i := 0; i < steps; i++ {
		// Mostly small steps, some landing exactly on window edges.
		switch rng.IntN(4) {
		case 0:
		case 1:
			now += int64(rng.IntN(1000)) * 1000
		case 2:
			now += int64(rng.IntN(3)+1) * 1_000_000
		case 3:
			now += int64(rng.IntN(400))
		}
		subjects := []otp.Subject{pool[rng.IntN(3)], pool[3+rng.IntN(2)]}
		if rng.IntN(5) == 0 {
			subjects = subjects[:1]
		}
		clock.Set(time.UnixMicro(now))
		d, err := l.Allow(ctx, ticket(), subjects)
		if err != nil {
			t.Fatal(err)
		}
		want := m.allow(now, subjects)
		got := modelResult{allowed: d.Allowed, retry: d.RetryAfter.Microseconds(), used: d.Tightest.Used, reset: d.Tightest.Reset.Microseconds()}
		for k, p := range d.Policies {
			if p.Scope == d.Tightest.Scope && p.Rule == d.Tightest.Rule {
				got.tight = k
				break
			}
		}
		if got != want {
			t.Fatalf("step %d at %d with %v: limiter %+v, model %+v", i, now, subjects, got, want)
		}
		if d.Allowed {
			admitted++
		}
	}
	if admitted < steps/10 || admitted > steps*9/10 {
		t.Fatalf("admitted %d of %d: the traffic did not exercise both answers", admitted, steps)
	}
}

// outcome names a decision for testenv.Race; an error fails the test.
func outcome(t *testing.T, d otp.Decision, err error) string {
	switch {
	case err != nil:
		t.Error(err)
		return "error"
	case d.Allowed:
		return "admitted"
	}
	return "refused"
}

func TestAbandonedCallFailsWithItsContext(t *testing.T) {
	l, _, _ := newTestLimiter(t, single)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Allow(ctx, ticket(), []otp.Subject{ip("192.0.2.3")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("a canceled caller got %v, want context.Canceled", err)
	}
}

// TestPipelinedDecisionsStayExact races far more callers than pipeline
// slots, so decisions share pipelines, on a handful of hot subjects.
func testPipelinedDecisionsStayExact(t *testing.T, be backend) {
	rdb, prefix := be(t)
	// A loaded -race run queues 400 callers behind one pipeline for longer
	// than the default second: the bound here is on what is admitted.
	l := New(rdb, prefix, Options{Scripts: redisbatch.New(rdb, redisbatch.Options{Pipelines: 1, Timeout: 10 * time.Second})})
	got := testenv.Race(t, 400, func(i int) string {
		h := i % 4
		d, err := l.Allow(context.Background(), ticket(), []otp.Subject{phone(fmt.Sprintf("+1415555000%d", h)), ip(fmt.Sprintf("10.1.%d.%d", i/200, i%200))})
		return fmt.Sprint(h, " ", outcome(t, d, err))
	})
	for h := range 4 {
		if n := got[fmt.Sprint(h, " admitted")]; n != 1 {
			t.Errorf("hot phone %d admitted %d times, want 1", h, n)
		}
	}
}

// TestStalledRedisTimesOut: a Redis that accepts connections and never
// answers must cost a request no more than the limiter's timeout.
func TestStalledRedisTimesOut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // hold it open, say nothing
		}
	}()
	rdb := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), MaxRetries: -1, ContextTimeoutEnabled: true})
	defer rdb.Close()
	l := New(rdb, "x:", Options{Scripts: redisbatch.New(rdb, redisbatch.Options{Timeout: 300 * time.Millisecond})})
	start := time.Now()
	if _, err := l.Allow(context.Background(), ticket(), []otp.Subject{ip("192.0.2.4")}); err == nil {
		t.Fatal("a decision from a Redis that never answers")
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("took %v with a 300ms timeout", el)
	}
}

func testStatusAndReset(t *testing.T, be backend) {
	l, _, clock := newTestLimiter(t, be)
	ctx := context.Background()
	a, x := phone("+14155550100"), ip("203.0.113.70")
	for _, at := range []time.Duration{0, time.Minute + 5*time.Second} {
		clock.Set(t0.Add(at))
		if d, err := l.Allow(ctx, ticket(), []otp.Subject{a, x}); err != nil || !d.Allowed {
			t.Fatalf("allow at %v: %+v %v", at, d, err)
		}
	}
	clock.Set(t0.Add(time.Minute + 20*time.Second))
	got, err := l.Status(ctx, []otp.Subject{a, x})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		policy string
		used   int
		reset  time.Duration
	}{
		{"phone-1m", 1, 45 * time.Second},                // full: room when the 65s entry leaves at 125s
		{"phone-10m", 2, 8*time.Minute + 40*time.Second}, // oldest (0s) leaves at 600s
		{"phone-1h", 2, 58*time.Minute + 40*time.Second},
		{"ip-1m", 1, 45 * time.Second},
		{"ip-10m", 2, 8*time.Minute + 40*time.Second},
		{"ip-1h", 2, 58*time.Minute + 40*time.Second},
	}
	if len(got) != len(want) {
		t.Fatalf("%d windows", len(got))
	}
	for i, w := range want {
		if got[i].Policy() != w.policy || got[i].Used != w.used || got[i].Reset != w.reset {
			t.Errorf("window %d: %s used %d reset %v; want %+v", i, got[i].Policy(), got[i].Used, got[i].Reset, w)
		}
	}
	if err := l.Reset(ctx, []otp.Subject{a}); err != nil {
		t.Fatal(err)
	}
	got, _ = l.Status(ctx, []otp.Subject{a, x})
	if got[0].Used != 0 || got[0].Reset != 0 || got[3].Used != 1 {
		t.Fatalf("after resetting the phone: %+v", got)
	}
	if d, _ := l.Allow(ctx, ticket(), []otp.Subject{a, x}); !d.Allowed {
		t.Fatal("the phone is still limited after a reset")
	}
}

// modelSubjects are the subjects the reference-model tests draw from: three
// phones and two addresses, with windows short enough for a few clock steps
// to cross them.
func modelSubjects() []otp.Subject {
	small := []otp.Rule{{Window: 2 * time.Second, Max: 2}, {Window: 5 * time.Second, Max: 3}, {Window: 13 * time.Second, Max: 5}}
	tiny := []otp.Rule{{Window: 3 * time.Second, Max: 1}, {Window: 7 * time.Second, Max: 2}}
	return []otp.Subject{
		{Scope: "phone", Key: "phone:a", Rules: tiny},
		{Scope: "phone", Key: "phone:b", Rules: tiny},
		{Scope: "phone", Key: "phone:c", Rules: tiny},
		{Scope: "ip", Key: "ip:x", Rules: small},
		{Scope: "ip", Key: "ip:y", Rules: small},
	}
}
