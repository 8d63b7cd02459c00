package pumping

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/internal/redistopo"
	"smsgw/internal/testenv"
	"smsgw/otp"
)

// fixture is a guard on the test Redis under the test's own prefix, with a
// clock the test moves.
type fixture struct {
	rdb    redis.UniversalClient
	prefix string
	clock  *testenv.Clock
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	return &fixture{rdb: rdb, prefix: prefix, clock: testenv.NewClock(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))}
}

// onCluster is a fixture on a real 3-master Redis Cluster, keys under a
// prefix of the test's own (the cluster is the test's own too).
func onCluster(t *testing.T, c *redistopo.Cluster) *fixture {
	t.Helper()
	rdb := c.Client()
	t.Cleanup(func() { rdb.Close() })
	return &fixture{rdb: rdb, prefix: "test:" + testenv.Unique() + ":", clock: testenv.NewClock(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))}
}

func (f *fixture) guard(t *testing.T, edit func(*Config), cluster bool) *Guard {
	t.Helper()
	cfg := DefaultConfig()
	if edit != nil {
		edit(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return New(f.rdb, f.prefix, cfg, Options{Clock: func(context.Context) time.Time { return f.clock.Now() }, Cluster: cluster})
}

// eachLayout runs test as a subtest "cluster=false" and "cluster=true":
// the guard's calls as on one primary, then one per slot as on Redis
// Cluster, each on a fixture of its own.
func eachLayout(t *testing.T, test func(t *testing.T, f *fixture, cluster bool)) {
	for _, cluster := range []bool{false, true} {
		t.Run(fmt.Sprintf("cluster=%v", cluster), func(t *testing.T) { test(t, newFixture(t), cluster) })
	}
}

func (f *fixture) advance(d time.Duration) { f.clock.Set(f.clock.Now().Add(d)) }

func phone(t testing.TB, raw string) otp.Phone {
	t.Helper()
	p, err := otp.ParsePhone(raw, "")
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return p
}

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

// reserve asks g and fails the test on an error.
func reserve(t *testing.T, g *Guard, p otp.Phone, from netip.Addr) otp.PumpingReservation {
	t.Helper()
	r, err := g.Reserve(context.Background(), p, from, false)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// only keeps the named rules on (everything else off), so a test sees one
// rule at a time.
func only(rules ...string) func(*Config) {
	return func(c *Config) {
		c.Floors = map[string]int{}
		for _, r := range rules {
			c.Floors[r] = DefaultFloors()[r]
		}
	}
}

func TestRules(t *testing.T) {
	for _, cluster := range []bool{false, true} {
		t.Run(fmt.Sprintf("cluster=%v", cluster), func(t *testing.T) {
			// spread gives every send a phone of its own, for the rows
			// that test network rules alone.
			spread := func(i int) string { return fmt.Sprintf("+4474001%05d", i*7) }
			tests := []struct {
				name  string
				rules []string
				// send i goes to phones[i] from ips[i]
				phone func(i int) string
				ip    func(i int) string
				// admitted is how many pass before the first refusal
				admitted  int
				wantRule  string
				wantScope string
			}{
				{"sequential numbers fill a 100-block", []string{RuleRange100, RuleRange1k},
					func(i int) string { return fmt.Sprintf("+4474001000%02d", i) },
					func(i int) string { return fmt.Sprintf("198.51.%d.1", i) }, 2, RuleRange100, "range"},
				{"numbers spread over a 1000-block", []string{RuleRange100, RuleRange1k},
					func(i int) string { return fmt.Sprintf("+447400100%d00", i) },
					func(i int) string { return fmt.Sprintf("198.51.%d.1", i) }, 3, RuleRange1k, "range"},
				{"rotating /64s of one /56", []string{RuleNet64, RuleNet56, RuleNet48},
					spread, func(i int) string { return fmt.Sprintf("2001:db8:1:%x::1", i) }, 8, RuleNet56, "network"},
				{"rotating /56s of one /48", []string{RuleNet64, RuleNet56, RuleNet48},
					spread, func(i int) string { return fmt.Sprintf("2001:db8:1:%x00::1", i) }, 12, RuleNet48, "network"},
				{"rotating addresses of one /24", []string{RuleNet32, RuleNet24},
					spread, func(i int) string { return fmt.Sprintf("203.0.113.%d", i) }, 10, RuleNet24, "network"},
				{"rotating /24s of one /16", []string{RuleNet32, RuleNet24, RuleNet16},
					spread, func(i int) string { return fmt.Sprintf("203.0.%d.1", i) }, 30, RuleNet16, "network"},
				{"rotating /48s of one IPv6 /32", []string{RuleNet64, RuleNet48, RuleNet6x32},
					spread, func(i int) string { return fmt.Sprintf("2001:db8:%x::1", i) }, 40, RuleNet6x32, "network"},
				{"one address", []string{RuleNet32, RuleNet24},
					spread, func(i int) string { return "203.0.113.9" }, 5, RuleNet32, "network"},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					f := newFixture(t)
					g := f.guard(t, only(tt.rules...), cluster)
					for i := 0; ; i++ {
						r := reserve(t, g, phone(t, tt.phone(i)), ip(tt.ip(i)))
						if r.Refused == nil {
							if i >= tt.admitted {
								t.Fatalf("send %d admitted; want a refusal after %d", i, tt.admitted)
							}
							continue
						}
						if i != tt.admitted {
							t.Fatalf("send %d refused by %s; want %d admitted first", i, r.Refused.Rule, tt.admitted)
						}
						if r.Refused.Rule != tt.wantRule || r.Refused.Scope != tt.wantScope {
							t.Fatalf("refused by %s (%s); want %s (%s)", r.Refused.Rule, r.Refused.Scope, tt.wantRule, tt.wantScope)
						}
						if r.Refused.RetryAfter <= 0 || r.Refused.RetryAfter > 24*time.Hour {
							t.Fatalf("retry after %s", r.Refused.RetryAfter)
						}
						if r.Ticket != nil {
							t.Fatal("a refusal carries a ticket")
						}
						return
					}
				})
			}
		})
	}
}

// An approval earns its range room: a range whose numbers verify keeps
// being served.
func TestApprovalsEarnRoom(t *testing.T) {
	f := newFixture(t)
	g := f.guard(t, only(RuleRange100), false)
	ctx := context.Background()
	for i := 0; i < 20; i++ {
		p := phone(t, fmt.Sprintf("+4474001000%02d", i))
		if r := reserve(t, g, p, ip("198.51.100.1")); r.Refused != nil {
			t.Fatalf("send %d refused by %s although every earlier code was approved", i, r.Refused.Rule)
		}
		if i%4 != 3 { // three of four approve
			if err := g.Approved(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		f.advance(time.Minute)
	}
}

// The window slides: a full range gets room back as its texts age out.
func TestWindowSlides(t *testing.T) {
	f := newFixture(t)
	g := f.guard(t, func(c *Config) { only(RuleRange100)(c); c.Window = 2 * time.Hour }, false)
	for i := 0; i < 2; i++ {
		reserve(t, g, phone(t, fmt.Sprintf("+4474001000%02d", i)), ip("198.51.100.1"))
	}
	r := reserve(t, g, phone(t, "+447400100010"), ip("198.51.100.1"))
	if r.Refused == nil {
		t.Fatal("a full range admitted")
	}
	f.advance(r.Refused.RetryAfter)
	if r := reserve(t, g, phone(t, "+447400100011"), ip("198.51.100.1")); r.Refused != nil {
		t.Fatalf("still refused after retry_after: %+v", r.Refused)
	}
}

// The country counts a text the moment it is sent, so a surge nobody has had
// time to verify meets its budget at once; an approval gives it back.
func TestCountryCountsAtOnce(t *testing.T) {
	f := newFixture(t)
	g := f.guard(t, func(c *Config) { only(RuleCountry)(c); c.Floors[RuleCountry] = 3 }, false)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if r := reserve(t, g, phone(t, fmt.Sprintf("+3712%07d", i*1000)), ip(fmt.Sprintf("10.%d.0.1", i))); r.Refused != nil {
			t.Fatalf("text %d refused by %s", i, r.Refused.Rule)
		}
	}
	r := reserve(t, g, phone(t, "+37129000000"), ip("10.9.0.1"))
	if r.Refused == nil || r.Refused.Rule != RuleCountry || r.Refused.Scope != "country" {
		t.Fatalf("a fourth unverified text the same second: %+v", r.Refused)
	}
	// Two approvals give their texts back and earn room; the country stays
	// restricted for new numbers with no sign of a real user, though, until
	// restrict_for has passed.
	for i := 0; i < 2; i++ {
		if err := g.Approved(ctx, phone(t, fmt.Sprintf("+3712%07d", i*1000))); err != nil {
			t.Fatal(err)
		}
	}
	if r := reserve(t, g, phone(t, "+37129100000"), ip("10.9.0.1")); r.Refused == nil {
		t.Fatal("a restricted country served a send with no sign of a real user")
	}
	f.advance(DefaultConfig().RestrictFor)
	for i := 0; i < 2; i++ {
		if r := reserve(t, g, phone(t, fmt.Sprintf("+3712920%04d", i)), ip("10.9.0.1")); r.Refused != nil {
			t.Fatalf("send %d after approvals gave room back: %+v", i, r.Refused)
		}
	}
}

// verifiedEarlier is a real GB user who verified two hours ago from her
// home network, 203.0.113.5: her number returns, her networks approve.
func verifiedEarlier(t *testing.T, f *fixture, g *Guard) otp.Phone {
	t.Helper()
	user := phone(t, "+447400555123")
	reserve(t, g, user, ip("203.0.113.5"))
	if err := g.Approved(context.Background(), user); err != nil {
		t.Fatal(err)
	}
	f.advance(2 * time.Hour)
	return user
}

// A restricted country keeps serving the sends that carry a sign of a real
// user: a returning number, a caller network whose own codes to this
// country are approved, a solved challenge; and counts what it did.
func TestRestrictedCountryServesRealUsers(t *testing.T) {
	eachLayout(t, func(t *testing.T, f *fixture, cluster bool) {
		g := f.guard(t, func(c *Config) {
			only(RuleCountry, RuleNet24, RuleNet16, RuleNet48, RuleNet6x32)(c)
			c.Floors[RuleCountry] = 3
		}, cluster)
		ctx := context.Background()
		user := verifiedEarlier(t, f, g)
		// Now bots spread over the country from rotating /16s.
		admitted := 0
		for i := 0; i < 20; i++ {
			r := reserve(t, g, phone(t, fmt.Sprintf("+4477%08d", 10_000_000+i*123_457)), ip(fmt.Sprintf("10.%d.0.1", i)))
			if r.Refused == nil {
				admitted++
			} else if r.Refused.Rule != RuleCountry {
				t.Fatalf("attack send %d refused by %s", i, r.Refused.Rule)
			}
		}
		if admitted != 3 {
			t.Fatalf("the spread got %d texts; want the floor, 3", admitted)
		}
		// The returning user, from a new network: served.
		if r := reserve(t, g, user, ip("192.0.2.77")); r.Refused != nil {
			t.Fatalf("a returning number refused: %+v", r.Refused)
		}
		// A new user from the network that verifies: served.
		if r := reserve(t, g, phone(t, "+447400666555"), ip("203.0.113.77")); r.Refused != nil {
			t.Fatalf("a new number from an approving network refused: %+v", r.Refused)
		}
		// The approving network verifies GB codes, not Latvian ones.
		if r := reserve(t, g, phone(t, "+37126000001"), ip("203.0.113.78")); r.Refused != nil {
			t.Fatalf("Latvia is not restricted: %+v", r.Refused)
		}
		// A new number from nowhere known: refused; with a solved
		// challenge: served.
		stranger := phone(t, "+447400777777")
		if r := reserve(t, g, stranger, ip("198.18.0.1")); r.Refused == nil || r.Refused.Rule != RuleCountry {
			t.Fatalf("a stranger in a restricted country: %+v", r.Refused)
		}
		if _, held := g.Held(stranger, ip("198.18.0.2")); held {
			t.Fatal("a restricted country is held in memory: its real users could not be told apart")
		}
		if r, err := g.Reserve(ctx, stranger, ip("198.18.0.1"), true); err != nil || r.Refused != nil {
			t.Fatalf("a solved challenge: %+v %v", r.Refused, err)
		}
		held, _, err := g.Holds(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var gb *otp.PumpingHold
		for i := range held {
			if held[i].Rule == RuleCountry && held[i].Subject == "GB" {
				gb = &held[i]
			}
		}
		if gb == nil || gb.Restricted == nil {
			t.Fatalf("GB is not listed as restricted: %+v", held)
		}
		want := otp.CountryRestriction{Since: f.clock.Now(), Until: f.clock.Now().Add(DefaultConfig().RestrictFor),
			Unverified: 4, Budget: 3, Refused: 18, ServedReturning: 1, ServedNetwork: 1, ServedChallenge: 1}
		if got := *gb.Restricted; !got.Since.Equal(want.Since) || !got.Until.Equal(want.Until) || got.Unverified != want.Unverified ||
			got.Budget != want.Budget || got.Refused != want.Refused || got.ServedReturning != want.ServedReturning ||
			got.ServedNetwork != want.ServedNetwork || got.ServedChallenge != want.ServedChallenge {
			t.Fatalf("restriction %+v; want %+v", got, want)
		}
	})
}

// With challenge_budget, solved challenges pass a country's rule within a
// budget of their own, earned by their approvals: a solving farm's texts
// are never approved, a person's are. Without it (the default, as the
// contract says) a solved challenge passes every pumping rule:
// TestBypassPassesRulesButCounts.
func TestSolvedChallengesEarnTheirOwnBudget(t *testing.T) {
	f := newFixture(t)
	g := f.guard(t, func(c *Config) {
		only(RuleCountry, RuleRange100)(c)
		c.Floors[RuleCountry] = 3
		c.ChallengeBudget = true
	}, false)
	ctx := context.Background()
	bypass := func(raw string) *otp.PumpingRefusal {
		t.Helper()
		r, err := g.Reserve(ctx, phone(t, raw), ip("198.18.0.1"), true)
		if err != nil {
			t.Fatal(err)
		}
		return r.Refused
	}
	for i := 0; i < 3; i++ {
		if r := bypass(fmt.Sprintf("+3712%07d", i*100_000)); r != nil {
			t.Fatalf("solved challenge %d refused: %+v", i, r)
		}
	}
	if r := bypass("+37129900000"); r == nil || r.Rule != RuleCountry {
		t.Fatalf("a fourth solved challenge nobody verified: %+v", r)
	}
	if err := g.Approved(ctx, phone(t, "+37120000000")); err != nil {
		t.Fatal(err)
	}
	if r := bypass("+37129900000"); r != nil {
		t.Fatalf("refused after a solved challenge's code was approved: %+v", r)
	}
}

func TestShadowRefusesNothing(t *testing.T) {
	f := newFixture(t)
	g := f.guard(t, func(c *Config) { only(RuleRange100)(c); c.Mode = ModeShadow }, false)
	var shadowed int
	for i := 0; i < 10; i++ {
		r := reserve(t, g, phone(t, fmt.Sprintf("+4474001000%02d", i)), ip("198.51.100.1"))
		if r.Refused != nil {
			t.Fatalf("shadow mode refused send %d", i)
		}
		if r.Shadow != nil {
			shadowed++
		}
	}
	if shadowed != 8 {
		t.Fatalf("%d sends would have been refused; want 8", shadowed)
	}
	if _, held := g.Held(phone(t, "+447400100099"), ip("198.51.100.1")); held {
		t.Fatal("shadow mode holds in memory")
	}
}

// In shadow mode a country over budget is restricted and counted on: the
// restriction is written with the counts, extended by each send that would
// have been refused, and the hash keeps its expiry.
func TestShadowRestrictsTheCountry(t *testing.T) {
	f := newFixture(t)
	g := f.guard(t, func(c *Config) { only(RuleCountry)(c); c.Floors[RuleCountry] = 3; c.Mode = ModeShadow }, false)
	ctx := context.Background()
	key := f.prefix + "pump:{d:LV}:c"
	send := func(i int) otp.PumpingReservation {
		t.Helper()
		r := reserve(t, g, phone(t, fmt.Sprintf("+3712%07d", i*1000)), ip(fmt.Sprintf("10.%d.0.1", i)))
		if r.Refused != nil {
			t.Fatalf("shadow mode refused send %d", i)
		}
		return r
	}
	for i := range 3 {
		if r := send(i); r.Shadow != nil {
			t.Fatalf("send %d under budget: %+v", i, r.Shadow)
		}
	}
	tripped := f.clock.Now()
	if r := send(3); r.Shadow == nil || r.Shadow.Rule != RuleCountry {
		t.Fatalf("a fourth unverified text: %+v, want the country's shadow refusal", r.Shadow)
	}
	check := func(texts int, since, until time.Time) {
		t.Helper()
		v, err := f.rdb.HMGet(ctx, key, fieldTexts, fieldRestrictedSince, fieldRestrictedUntil).Result()
		if err != nil {
			t.Fatal(err)
		}
		want := []any{fmt.Sprint(texts), fmt.Sprint(since.UnixMilli()), fmt.Sprint(until.UnixMilli())}
		if fmt.Sprint(v) != fmt.Sprint(want) {
			t.Fatalf("country S rs rx = %v, want %v", v, want)
		}
		if ttl, err := f.rdb.PTTL(ctx, key).Result(); err != nil || ttl <= 0 {
			t.Fatalf("country hash TTL %v %v: want an expiry", ttl, err)
		}
	}
	check(4, tripped, tripped.Add(DefaultConfig().RestrictFor))
	f.advance(10 * time.Minute)
	if r := send(4); r.Shadow == nil {
		t.Fatal("a restricted country's send with no sign of a real user: no shadow refusal")
	}
	check(5, tripped, f.clock.Now().Add(DefaultConfig().RestrictFor))
}

func TestSpendCeiling(t *testing.T) {
	f := newFixture(t)
	g := f.guard(t, func(c *Config) {
		c.Mode = ModeOff // the ceiling applies even with the automatic rules off
		c.Spend = Spend{Prices: map[string]float64{"LV": 0.25}, Default: 0.01, Hour: 1, Day: 0}
	}, false)
	for i := 0; i < 4; i++ {
		if r := reserve(t, g, phone(t, fmt.Sprintf("+3712%07d", i*1000)), ip("198.51.100.1")); r.Refused != nil {
			t.Fatalf("text %d refused with the budget unspent", i)
		}
	}
	r := reserve(t, g, phone(t, "+37129000000"), ip("198.51.100.1"))
	if r.Refused == nil || r.Refused.Rule != RuleSpendHour || r.Refused.Scope != "spend" {
		t.Fatalf("over the hourly budget: %+v", r.Refused)
	}
	if r.Refused.Used != 1 || r.Refused.Limit != 1 {
		t.Fatalf("used %v of %v; want 1 of 1", r.Refused.Used, r.Refused.Limit)
	}
	// Memory answers the next one.
	if _, held := g.Held(phone(t, "+447400100001"), ip("198.51.100.2")); !held {
		t.Fatal("the ceiling is not held in memory")
	}
	// A solved challenge passes the pumping rules, never the ceiling.
	r, err := g.Reserve(context.Background(), phone(t, "+37129000001"), ip("198.51.100.1"), true)
	if err != nil || r.Refused == nil {
		t.Fatalf("bypass passed the ceiling: %+v %v", r.Refused, err)
	}
}

func TestBypassPassesRulesButCounts(t *testing.T) {
	f := newFixture(t)
	g := f.guard(t, only(RuleRange100), false)
	for i := 0; i < 2; i++ {
		reserve(t, g, phone(t, fmt.Sprintf("+4474001000%02d", i)), ip("198.51.100.1"))
	}
	r, err := g.Reserve(context.Background(), phone(t, "+447400100050"), ip("198.51.100.1"), true)
	if err != nil || r.Refused != nil || r.Ticket == nil {
		t.Fatalf("a solved challenge was refused: %+v %v", r.Refused, err)
	}
	// It counted: the range's next unchallenged text finds three texts in it.
	r = reserve(t, g, phone(t, "+447400100051"), ip("198.51.100.1"))
	if r.Refused == nil || r.Refused.Rule != RuleRange100 || r.Refused.Used != 3 {
		t.Fatalf("after a bypass: %+v; want range_100 refused with 3 used", r.Refused)
	}
}

func TestReleaseGivesBack(t *testing.T) {
	eachLayout(t, func(t *testing.T, f *fixture, cluster bool) {
		g := f.guard(t, func(c *Config) {
			only(RuleRange100, RuleNet32, RuleCountry)(c)
			c.Spend = Spend{Default: 1, Day: 2}
		}, cluster)
		ctx := context.Background()
		for i := 0; i < 10; i++ {
			r := reserve(t, g, phone(t, fmt.Sprintf("+4474001000%02d", i)), ip("198.51.100.1"))
			if r.Refused != nil {
				t.Fatalf("send %d refused by %s although each was released", i, r.Refused.Rule)
			}
			if err := g.Release(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// Two replicas racing on one range admit exactly its budget: the check and
// the count are one step.
func TestReplicasRaceOnOneRange(t *testing.T) {
	eachLayout(t, func(t *testing.T, f *fixture, cluster bool) {
		replicas := []*Guard{f.guard(t, only(RuleRange100), cluster), f.guard(t, only(RuleRange100), cluster)}
		got := testenv.Race(t, 60, func(i int) string {
			r, err := replicas[i%2].Reserve(context.Background(), phone(t, fmt.Sprintf("+4474001000%02d", i)), ip("198.51.100.1"), false)
			return reserved(t, r, err)
		})
		if n := got["admitted"]; n != 2 {
			t.Fatalf("admitted %d; want exactly the floor, 2", n)
		}
	})
}

// countingHook counts the commands a client sends, but those the replicas'
// Run loops make in the background (overrides' reloads, connection set-up).
// reserved is a racing Reserve's outcome for testenv.Race: admitted,
// refused, or error (a test error).
func reserved(t *testing.T, r otp.PumpingReservation, err error) string {
	switch {
	case err != nil:
		t.Error(err)
		return "error"
	case r.Refused == nil:
		return "admitted"
	}
	return "refused"
}

type countingHook struct{ n atomic.Int64 }

func counted(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "hgetall", "hello", "client", "ping", "subscribe": // Run's reloads and new connections
		return false
	}
	return true
}

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if counted(cmd) {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if counted(c) {
				h.n.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

// A held range is answered from memory, and a lift reaches every replica.
func TestHeldFromMemoryAndLifted(t *testing.T) {
	f := newFixture(t)
	hook := &countingHook{}
	f.rdb.AddHook(hook)
	a, b := f.guard(t, only(RuleRange100), false), f.guard(t, only(RuleRange100), false)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = a.Run(ctx) })
	wg.Go(func() { _ = b.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	for i := 0; i < 2; i++ {
		reserve(t, a, phone(t, fmt.Sprintf("+4474001000%02d", i)), ip("198.51.100.1"))
	}
	for _, g := range []*Guard{a, b} {
		if r := reserve(t, g, phone(t, "+447400100010"), ip("198.51.100.1")); r.Refused == nil {
			t.Fatal("a full range admitted")
		}
	}
	before := hook.n.Load()
	for i := 0; i < 100; i++ {
		if _, held := b.Held(phone(t, fmt.Sprintf("+4474001000%02d", 20+i%50)), ip("198.51.100.7")); !held {
			t.Fatal("the held range is not answered from memory")
		}
	}
	if n := hook.n.Load() - before; n != 0 {
		t.Fatalf("answering held sends cost %d Redis commands", n)
	}

	held, _, err := a.Holds(ctx)
	if err != nil || len(held) != 1 || held[0].Rule != RuleRange100 || held[0].Subject != "+4474001000xx" {
		t.Fatalf("holds: %+v %v", held, err)
	}
	if err := a.Lift(ctx, held[0].Rule, held[0].Subject); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the lift to reach the other replica", func() bool {
		_, still := b.Held(phone(t, "+447400100010"), ip("198.51.100.1"))
		return !still
	})
	if r := reserve(t, b, phone(t, "+447400100011"), ip("198.51.100.1")); r.Refused != nil {
		t.Fatalf("refused after the lift: %+v", r.Refused)
	}
}

func TestOverrides(t *testing.T) {
	f := newFixture(t)
	a, b := f.guard(t, nil, false), f.guard(t, nil, false)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = b.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	in := func(d time.Duration) time.Time { return f.clock.Now().Add(d) }
	for _, o := range []otp.Override{
		{Target: "+44740010", Action: otp.OverrideBlock, Note: "pumped range", ExpiresAt: in(time.Hour)},
		{Target: "+447400100001", Action: otp.OverrideAllow, Note: "our QA phone", ExpiresAt: in(time.Hour)},
		{Target: "+3712", Action: otp.OverrideBlock, ExpiresAt: in(time.Minute)},
	} {
		if err := a.SetOverride(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		e164   string
		want   otp.OverrideAction
		exists bool
	}{
		{"+447400100001", otp.OverrideAllow, true}, // the longest target wins
		{"+447400100002", otp.OverrideBlock, true},
		{"+447400200002", "", false},
		{"+37120000000", otp.OverrideBlock, true},
	}
	for _, tt := range tests {
		t.Run(tt.e164, func(t *testing.T) {
			testenv.WaitUntil(t, 10*time.Second, "the override on the other replica", func() error {
				if o, ok := b.Lookup(tt.e164); ok != tt.exists || o.Action != tt.want {
					return fmt.Errorf("the other replica says %v %q; want %v %q", ok, o.Action, tt.exists, tt.want)
				}
				return nil
			})
		})
	}
	f.advance(2 * time.Minute)
	if _, ok := b.Lookup("+37120000000"); ok {
		t.Fatal("an expired override still applies")
	}
	list, err := a.ListOverrides(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := a.DeleteOverride(ctx, "+44740010"); err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteOverride(ctx, "+44740010"); err == nil {
		t.Fatal("deleting a missing override succeeded")
	}
	for _, bad := range []otp.Override{
		{Target: "447400", Action: otp.OverrideBlock, ExpiresAt: in(time.Hour)},
		{Target: "+44x", Action: otp.OverrideBlock, ExpiresAt: in(time.Hour)},
		{Target: "+44", Action: "maybe", ExpiresAt: in(time.Hour)},
		{Target: "+44", Action: otp.OverrideBlock, ExpiresAt: in(-time.Hour)},
	} {
		if err := a.SetOverride(ctx, bad); err == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
}

// A network over its budget admits one probe per period, so a shared
// address whose users verify earns its room back; a range never does.
func TestHeldNetworkProbes(t *testing.T) {
	f := newFixture(t)
	g := f.guard(t, only(RuleNet32, RuleRange100), false)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		reserve(t, g, phone(t, fmt.Sprintf("+4474001%05d", i*1000)), ip("100.64.0.1"))
	}
	if r := reserve(t, g, phone(t, "+447400199000"), ip("100.64.0.1")); r.Refused == nil || r.Refused.Rule != RuleNet32 {
		t.Fatalf("sixth unverified text from one address: %+v", r.Refused)
	}
	f.advance(10 * time.Minute)
	probe := phone(t, "+447400188000")
	if r := reserve(t, g, probe, ip("100.64.0.1")); r.Refused != nil {
		t.Fatalf("no probe after the period: %+v", r.Refused)
	}
	if r := reserve(t, g, phone(t, "+447400177000"), ip("100.64.0.1")); r.Refused == nil {
		t.Fatal("two probes in one period")
	}
	// The probe's user verifies: the address earns room (hour factor 4).
	if err := g.Approved(ctx, probe); err != nil {
		t.Fatal(err)
	}
	if r := reserve(t, g, phone(t, "+447400166000"), ip("100.64.0.1")); r.Refused != nil {
		t.Fatalf("refused after an approval earned room: %+v", r.Refused)
	}
	// Ranges never probe: sequential numbers stay held.
	for i := 0; i < 2; i++ {
		reserve(t, g, phone(t, fmt.Sprintf("+4474002000%02d", i)), ip(fmt.Sprintf("198.51.%d.1", i)))
	}
	f.advance(time.Hour)
	if r := reserve(t, g, phone(t, "+447400200050"), ip("198.51.9.1")); r.Refused == nil || r.Refused.Rule != RuleRange100 {
		t.Fatalf("a full block after an hour: %+v", r.Refused)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"mode", func(c *Config) { c.Mode = "on" }, "pumping.mode"},
		{"window", func(c *Config) { c.Window = 90 * time.Minute }, "pumping.window"},
		{"unknown rule", func(c *Config) { c.Floors["range_7"] = 1 }, "pumping.floors.range_7"},
		{"negative floor", func(c *Config) { c.Floors[RuleNet24] = -1 }, "pumping.floors.net_24"},
		{"ratio", func(c *Config) { c.Ratio = -1 }, "pumping.ratio"},
		{"price", func(c *Config) { c.Spend.Prices = map[string]float64{"gb": 1} }, "pumping.spend.prices.gb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.edit(&c)
			err := c.Validate()
			if err == nil || len(err.Error()) < len(tt.want) || err.Error()[:len(tt.want)] != tt.want {
				t.Fatalf("got %v; want an error naming %s", err, tt.want)
			}
		})
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

// On a real Redis Cluster every group of subjects lives in its own slot: a
// decision is one call per group, a refusal in one group releases what the
// others counted, and approvals reach the networks through the phone's
// record.
func TestRealCluster(t *testing.T) {
	c := redistopo.StartCluster(t, 3)
	t.Run("a range and a network refuse", func(t *testing.T) {
		f := onCluster(t, c)
		g := f.guard(t, only(RuleRange100, RuleNet32, RuleCountry), true)
		for i := 0; i < 2; i++ {
			if r := reserve(t, g, phone(t, fmt.Sprintf("+4474001000%02d", i)), ip("203.0.113.1")); r.Refused != nil {
				t.Fatalf("send %d refused by %s", i, r.Refused.Rule)
			}
		}
		r := reserve(t, g, phone(t, "+447400100050"), ip("203.0.113.2"))
		if r.Refused == nil || r.Refused.Rule != RuleRange100 {
			t.Fatalf("third number of the block: %+v", r.Refused)
		}
		// The network group counted nothing for the refused send: 203.0.113.2
		// still has its whole floor.
		for i := 0; i < 5; i++ {
			if r := reserve(t, g, phone(t, fmt.Sprintf("+4474002%05d", i*1000)), ip("203.0.113.2")); r.Refused != nil {
				t.Fatalf("network send %d refused by %s: the refused send was not released", i, r.Refused.Rule)
			}
		}
		if r := reserve(t, g, phone(t, "+447400299999"), ip("203.0.113.2")); r.Refused == nil || r.Refused.Rule != RuleNet32 {
			t.Fatalf("sixth text from one address: %+v", r.Refused)
		}
	})
	t.Run("approvals credit the asking network", func(t *testing.T) {
		f := onCluster(t, c)
		g := f.guard(t, only(RuleNet32), true)
		ctx := context.Background()
		for i := 0; i < 12; i++ {
			p := phone(t, fmt.Sprintf("+4474003%05d", i*1000))
			if r := reserve(t, g, p, ip("203.0.113.9")); r.Refused != nil {
				t.Fatalf("send %d refused although every code was approved", i)
			}
			if err := g.Approved(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("a restricted country serves a network that approves", func(t *testing.T) {
		f := onCluster(t, c)
		g := f.guard(t, func(c *Config) { only(RuleCountry, RuleNet24, RuleNet16)(c); c.Floors[RuleCountry] = 2 }, true)
		verifiedEarlier(t, f, g)
		for i := 0; i < 3; i++ {
			reserve(t, g, phone(t, fmt.Sprintf("+4477%08d", 10_000_000+i*123_457)), ip(fmt.Sprintf("10.%d.0.1", i)))
		}
		if r := reserve(t, g, phone(t, "+447400777777"), ip("198.18.0.1")); r.Refused == nil || r.Refused.Rule != RuleCountry {
			t.Fatalf("a stranger in a restricted country: %+v", r.Refused)
		}
		// This replica has not heard of 203.0.113.0/24 in the last minute:
		// the destination's call asks again with the caller call's answer.
		if r := reserve(t, g, phone(t, "+447400666555"), ip("203.0.113.77")); r.Refused != nil {
			t.Fatalf("a new number from an approving network: %+v", r.Refused)
		}
	})
	t.Run("replicas race", func(t *testing.T) {
		f := onCluster(t, c)
		replicas := []*Guard{f.guard(t, only(RuleRange100, RuleNet24), true), f.guard(t, only(RuleRange100, RuleNet24), true)}
		got := testenv.Race(t, 40, func(i int) string {
			r, err := replicas[i%2].Reserve(context.Background(), phone(t, fmt.Sprintf("+4474001000%02d", i)), ip(fmt.Sprintf("198.51.%d.1", i)), false)
			return reserved(t, r, err)
		})
		if n := got["admitted"]; n != 2 {
			t.Fatalf("admitted %d; want exactly 2", n)
		}
	})
	t.Run("holds, lift and overrides", func(t *testing.T) {
		f := onCluster(t, c)
		g := f.guard(t, only(RuleRange100), true)
		ctx := context.Background()
		for i := 0; i < 3; i++ {
			reserve(t, g, phone(t, fmt.Sprintf("+4474001000%02d", i)), ip("198.51.100.1"))
		}
		held, _, err := g.Holds(ctx)
		if err != nil || len(held) != 1 {
			t.Fatalf("holds: %+v %v", held, err)
		}
		if err := g.Lift(ctx, held[0].Rule, held[0].Subject); err != nil {
			t.Fatal(err)
		}
		if r := reserve(t, g, phone(t, "+447400100077"), ip("198.51.100.1")); r.Refused != nil {
			t.Fatalf("refused after the lift: %+v", r.Refused)
		}
		if err := g.SetOverride(ctx, otp.Override{Target: "+447400", Action: otp.OverrideBlock, ExpiresAt: f.clock.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if o, ok := g.Lookup("+447400100077"); !ok || o.Action != otp.OverrideBlock {
			t.Fatalf("lookup: %+v %v", o, ok)
		}
	})
}
