package pumping

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"smsgw/internal/redisbatch"
	"smsgw/internal/testenv"
	"smsgw/otp"
)

// t0 is on a minute boundary, so bucket edges fall on whole minutes after it.
var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func testConfig() Config {
	return Config{Mode: ModeEnforce, MinSends: 20, MinApprovalRatio: 0.2, Window: time.Hour, Quarantine: time.Hour}
}

func newGuard(t *testing.T, rdb redis.UniversalClient, prefix string, cfg Config, log *slog.Logger) (*Guard, *prometheus.Registry) {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if log == nil {
		log = quiet
	}
	reg := prometheus.NewRegistry()
	return New(rdb, prefix, nil, cfg, log, reg), reg
}

// client is another connection to the test Redis, as a second replica has.
func client(t *testing.T, name string) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(testenv.RedisURL())
	if err != nil {
		t.Fatal(err)
	}
	opt.ClientName = name
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// run starts g.Run until the test ends, and requires it to end cleanly.
func run(t *testing.T, g *Guard) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// waitLoaded waits until each guard has subscribed and done the reload that
// follows, so what it learns afterwards can only come from a message or a
// later reload.
func waitLoaded(t *testing.T, guards ...*Guard) {
	t.Helper()
	for i, g := range guards {
		eventually(t, 5*time.Second, func() bool { return g.reloads.Load() >= 1 }, fmt.Sprintf("guard %d subscribed and loaded", i))
	}
}

// eventually polls cond and returns how long it took to hold.
func eventually(t *testing.T, within time.Duration, cond func() bool, what string) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return time.Since(start)
}

// metric reads one series from reg; labels are name, value pairs.
func metric(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue series
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// wantHeld requires the country quarantined for about a full quarantine.
func wantHeld(t *testing.T, g *Guard, country string, q time.Duration) {
	t.Helper()
	left, ok := g.Quarantined(country)
	if !ok {
		t.Fatalf("%s is not quarantined", country)
	}
	if left > q || left < q-5*time.Second {
		t.Fatalf("%s quarantined for %v more, want about %v", country, left, q)
	}
}

func wantList(t *testing.T, g *Guard, q time.Duration, want ...otp.Quarantine) {
	t.Helper()
	got, err := g.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("List = %+v, want %+v", got, want)
	}
	for i := range want {
		w, g := want[i], got[i]
		if g.Country != w.Country || g.Sends != w.Sends || g.Approvals != w.Approvals || g.Remaining > q || g.Remaining < q-5*time.Second {
			t.Fatalf("List[%d] = %+v, want %+v with about %v left", i, g, w, q)
		}
	}
}

// TestPumpingRun drives one guard through simulated traffic on the test
// clock. "send n" requires the country's state unchanged by the first n-1
// texts, and quarantined == held after the last: a trip happens exactly at
// the text that makes the window bad, not before.
func TestPumpingRun(t *testing.T) {
	type step struct {
		at      time.Duration // since t0
		op      string        // "send", "approve", "lift"
		country string
		n       int
		held    bool
	}
	tests := []struct {
		name  string
		steps []step
		trips map[string]int
		list  []otp.Quarantine
	}{
		{"no approvals trips at exactly MinSends", []step{
			{op: "send", country: "GB", n: 20, held: true},
		}, map[string]int{"GB": 1}, []otp.Quarantine{{Country: "GB", Sends: 20}}},
		{"a normal country beside a pumped one is untouched", []step{
			// FR approves 2 codes in 5, always at least 0.2 from the 20th text on.
			{op: "send", country: "FR", n: 5}, {op: "approve", country: "FR", n: 2},
			{op: "send", country: "FR", n: 5}, {op: "approve", country: "FR", n: 2},
			{op: "send", country: "GB", n: 20, held: true},
			{op: "send", country: "FR", n: 5}, {op: "approve", country: "FR", n: 2},
			{op: "send", country: "FR", n: 5}, {op: "approve", country: "FR", n: 2},
			{op: "send", country: "FR", n: 5}, {op: "approve", country: "FR", n: 2},
			{at: 30 * time.Minute, op: "send", country: "FR", n: 5}, {at: 30 * time.Minute, op: "approve", country: "FR", n: 2},
			{at: 30 * time.Minute, op: "send", country: "FR", n: 5}, {at: 30 * time.Minute, op: "approve", country: "FR", n: 2},
		}, map[string]int{"GB": 1, "FR": 0}, []otp.Quarantine{{Country: "GB", Sends: 20}}},
		{"approvals keep a country under; a ratio met exactly does not trip", []step{
			{op: "send", country: "DE", n: 10}, {op: "approve", country: "DE", n: 4},
			{op: "send", country: "DE", n: 10}, // 4 of 20 is 0.2 exactly
			{op: "send", country: "DE", n: 1, held: true},
		}, map[string]int{"DE": 1}, []otp.Quarantine{{Country: "DE", Sends: 21, Approvals: 4}}},
		{"a text one minute short of an hour old still counts", []step{
			{op: "send", country: "NG", n: 19},
			{at: 59*time.Minute + 59*time.Second, op: "send", country: "NG", n: 1, held: true},
		}, map[string]int{"NG": 1}, []otp.Quarantine{{Country: "NG", Sends: 20}}},
		{"the window slides: texts an hour old stop counting", []step{
			{op: "send", country: "NG", n: 19},
			{at: time.Hour, op: "send", country: "NG", n: 19},
			{at: time.Hour + 30*time.Second, op: "send", country: "NG", n: 1, held: true},
		}, map[string]int{"NG": 1}, []otp.Quarantine{{Country: "NG", Sends: 20}}},
		{"approvals an hour old stop counting too", []step{
			{op: "send", country: "PK", n: 10}, {op: "approve", country: "PK", n: 10},
			{at: 30 * time.Minute, op: "send", country: "PK", n: 10},      // 10 of 20
			{at: time.Hour, op: "send", country: "PK", n: 10, held: true}, // 0 of 20
		}, map[string]int{"PK": 1}, []otp.Quarantine{{Country: "PK", Sends: 20}}},
		{"texts to a quarantined country do not trip it again", []step{
			{op: "send", country: "GB", n: 20, held: true},
			{at: time.Minute, op: "send", country: "GB", n: 30, held: true},
		}, map[string]int{"GB": 1}, []otp.Quarantine{{Country: "GB", Sends: 20}}},
		{"a lifted country starts afresh", []step{
			{op: "send", country: "GB", n: 20, held: true},
			{at: time.Minute, op: "lift", country: "GB"},
			{at: time.Minute, op: "send", country: "GB", n: 20, held: true},
		}, map[string]int{"GB": 2}, []otp.Quarantine{{Country: "GB", Sends: 20}}},
		{"numbers without a region are guarded as ZZ", []step{
			{op: "send", country: "", n: 20, held: true},
		}, map[string]int{"ZZ": 1}, []otp.Quarantine{{Country: "ZZ", Sends: 20}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rdb, prefix := testenv.Redis(t)
			cfg := testConfig()
			g, reg := newGuard(t, rdb, prefix, cfg, nil)
			clock := testenv.NewClock(t0)
			g.now = clock.Now
			ctx := context.Background()
			for i, s := range tt.steps {
				clock.Set(t0.Add(s.at))
				switch s.op {
				case "approve":
					for range s.n {
						if err := g.Approved(ctx, s.country); err != nil {
							t.Fatal(err)
						}
					}
				case "lift":
					if err := g.Lift(ctx, s.country); err != nil {
						t.Fatal(err)
					}
					if _, ok := g.Quarantined(s.country); ok {
						t.Fatalf("step %d: %s still quarantined after a lift", i, s.country)
					}
				case "send":
					_, before := g.Quarantined(s.country)
					for j := 1; j <= s.n; j++ {
						if err := g.Sent(ctx, s.country); err != nil {
							t.Fatal(err)
						}
						want := before
						if j == s.n {
							want = s.held
						}
						if _, ok := g.Quarantined(s.country); ok != want {
							t.Fatalf("step %d, text %d of %d to %q: quarantined = %v, want %v", i, j, s.n, s.country, ok, want)
						}
					}
					if s.held {
						wantHeld(t, g, s.country, cfg.Quarantine)
					}
				}
			}
			for c, n := range tt.trips {
				if got := metric(t, reg, "smsgw_pumping_trips_total", "country", c, "mode", "enforce"); got != float64(n) {
					t.Errorf("trips{country=%s} = %v, want %d", c, got, n)
				}
			}
			if got := metric(t, reg, "smsgw_pumping_quarantined_countries"); got != float64(len(tt.list)) {
				t.Errorf("quarantined countries gauge = %v, want %d", got, len(tt.list))
			}
			wantList(t, g, cfg.Quarantine, tt.list...)
		})
	}
}

// TestScriptsUseRedisTime: with no test clock, buckets follow Redis TIME, so
// replicas with skewed clocks still agree.
func TestScriptsUseRedisTime(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	g, _ := newGuard(t, rdb, prefix, testConfig(), nil)
	ctx := context.Background()
	before := rdb.Time(ctx).Val()
	if err := g.Sent(ctx, "GB"); err != nil {
		t.Fatal(err)
	}
	if err := g.Approved(ctx, "GB"); err != nil {
		t.Fatal(err)
	}
	after := rdb.Time(ctx).Val()
	fields := rdb.HGetAll(ctx, g.countsKey("GB")).Val()
	if len(fields) != 2 {
		t.Fatalf("counts = %v, want one send and one approval bucket", fields)
	}
	for _, kind := range []string{"s", "a"} {
		ok := false
		for _, at := range []time.Time{before, after} {
			ok = ok || fields[kind+strconv.FormatInt(at.UnixMilli()/60000, 10)] == "1"
		}
		if !ok {
			t.Errorf("counts = %v: no %q bucket at Redis TIME %v", fields, kind, before)
		}
	}
	if ttl := rdb.PTTL(ctx, g.countsKey("GB")).Val(); ttl > 2*time.Hour || ttl < 2*time.Hour-5*time.Second {
		t.Errorf("counts expire in %v, want twice the window", ttl)
	}
}

// TestOldBucketsAreDropped: the counts hash holds O(window) fields however
// long a country keeps sending.
func TestOldBucketsAreDropped(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	cfg := testConfig()
	cfg.MinSends = 1_000_000
	g, _ := newGuard(t, rdb, prefix, cfg, nil)
	clock := testenv.NewClock(t0)
	g.now = clock.Now
	ctx := context.Background()
	for m := range 3 * 60 {
		clock.Set(t0.Add(time.Duration(m) * time.Minute))
		if err := g.Sent(ctx, "US"); err != nil {
			t.Fatal(err)
		}
		if err := g.Approved(ctx, "US"); err != nil {
			t.Fatal(err)
		}
	}
	if n := rdb.HLen(ctx, g.countsKey("US")).Val(); n > 2*60+2 {
		t.Fatalf("counts hold %d fields after 3 hours, want at most a window's", n)
	}
}

func TestShadowModeOnlyLogsAndCounts(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	cfg := testConfig()
	cfg.Mode = ModeShadow
	var logs testenv.Buffer
	g, reg := newGuard(t, rdb, prefix, cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	run(t, g)
	ctx := context.Background()
	for i := range 100 {
		if err := g.Sent(ctx, "GB"); err != nil {
			t.Fatal(err)
		}
		if i%10 == 9 {
			g.flush(ctx) // as Run does every gatherFor
		}
		if _, ok := g.Quarantined("GB"); ok {
			t.Fatalf("text %d: quarantined in shadow mode", i+1)
		}
	}
	if got := metric(t, reg, "smsgw_pumping_trips_total", "country", "GB", "mode", "shadow"); got != 1 {
		t.Errorf("trips = %v, want 1 (once per quarantine period)", got)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, logs.String())
	}
	wantList(t, g, cfg.Quarantine) // nothing quarantined
	if ttl := rdb.PTTL(ctx, g.shadowKey("GB")).Val(); ttl > cfg.Quarantine || ttl < cfg.Quarantine-5*time.Second {
		t.Errorf("shadow marker expires in %v, want a quarantine period", ttl)
	}
	// A new period (here, by lifting the marker) may warn again.
	if err := g.Lift(ctx, "GB"); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if err := g.Sent(ctx, "GB"); err != nil {
			t.Fatal(err)
		}
	}
	g.flush(ctx)
	if got := metric(t, reg, "smsgw_pumping_trips_total", "country", "GB", "mode", "shadow"); got != 2 {
		t.Errorf("trips after a new period = %v, want 2", got)
	}
	if _, ok := g.Quarantined("GB"); ok {
		t.Fatal("quarantined in shadow mode")
	}
}

func TestOffModeDoesNothing(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	cfg := testConfig()
	cfg.Mode = ModeOff
	g, reg := newGuard(t, rdb, prefix, cfg, nil)
	run(t, g)
	ctx := context.Background()
	for range 100 {
		if err := g.Sent(ctx, "GB"); err != nil {
			t.Fatal(err)
		}
		if _, ok := g.Quarantined("GB"); ok {
			t.Fatal("quarantined in off mode")
		}
	}
	if err := g.Approved(ctx, "GB"); err != nil {
		t.Fatal(err)
	}
	if keys := rdb.Keys(ctx, prefix+"*").Val(); len(keys) != 0 {
		t.Fatalf("off mode wrote %v", keys)
	}
	if got := metric(t, reg, "smsgw_pumping_trips_total", "country", "GB"); got != 0 {
		t.Fatalf("trips = %v in off mode", got)
	}
}

// TestReplicasShareQuarantines runs two guards, each with its own connection
// and Run loop, as two replicas would. The periodic reload is off, so only
// pub/sub can carry the news.
func TestReplicasShareQuarantines(t *testing.T) {
	_, prefix := testenv.Redis(t)
	cfg := testConfig()
	a, _ := newGuard(t, client(t, ""), prefix, cfg, nil)
	b, _ := newGuard(t, client(t, ""), prefix, cfg, nil)
	a.refresh, b.refresh = time.Hour, time.Hour
	run(t, a)
	run(t, b)
	waitLoaded(t, a, b)
	ctx := context.Background()

	for range cfg.MinSends {
		if err := a.Sent(ctx, "GB"); err != nil {
			t.Fatal(err)
		}
	}
	a.flush(ctx) // as Run does every gatherFor
	wantHeld(t, a, "GB", cfg.Quarantine)
	took := eventually(t, time.Second, func() bool { _, ok := b.Quarantined("GB"); return ok }, "replica b sees a's quarantine")
	t.Logf("replica b saw the trip after %v", took)
	wantHeld(t, b, "GB", cfg.Quarantine)
	wantList(t, b, cfg.Quarantine, otp.Quarantine{Country: "GB", Sends: cfg.MinSends})
	if _, ok := b.Quarantined("FR"); ok {
		t.Fatal("FR quarantined too")
	}

	if err := b.Lift(ctx, "GB"); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Quarantined("GB"); ok {
		t.Fatal("still quarantined on the replica that lifted it")
	}
	took = eventually(t, time.Second, func() bool { _, ok := a.Quarantined("GB"); return !ok }, "replica a sees b's lift")
	t.Logf("replica a saw the lift after %v", took)
	wantList(t, a, cfg.Quarantine)
	if ra, rb := a.reloads.Load(), b.reloads.Load(); ra != 1 || rb != 1 {
		t.Fatalf("reloads: a %d, b %d; want only the first, so the news came by message", ra, rb)
	}
}

// TestHeldAnswerTeachesAReplica: a replica that has not heard of a quarantine
// (no Run yet) learns it from the script's answer to its next send.
func TestHeldAnswerTeachesAReplica(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	cfg := testConfig()
	a, _ := newGuard(t, rdb, prefix, cfg, nil)
	b, breg := newGuard(t, rdb, prefix, cfg, nil)
	ctx := context.Background()
	for range cfg.MinSends {
		if err := a.Sent(ctx, "GB"); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := b.Quarantined("GB"); ok {
		t.Fatal("b knew without Run or a send")
	}
	if err := b.Sent(ctx, "GB"); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, b, "GB", cfg.Quarantine)
	if got := metric(t, breg, "smsgw_pumping_trips_total", "country", "GB", "mode", "enforce"); got != 0 {
		t.Fatalf("b counted a trip it did not make: %v", got)
	}
}

// TestRacingReplicasTripOnce races real goroutines over two guards on one
// Redis: the country trips exactly once, whatever the interleaving.
func TestRacingReplicasTripOnce(t *testing.T) {
	tests := []struct {
		name      string
		sends     int
		approvals int
		wantSends func(int) bool
	}{
		// Replicas gather counts for a moment, so the trip comes with what
		// was gathered: at least MinSends, and never twice.
		{"no approvals", 200, 0, func(n int) bool { return n >= 20 }},
		{"approvals racing too", 200, 10, func(n int) bool { return n >= 20 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, prefix := testenv.Redis(t)
			cfg := testConfig()
			a, areg := newGuard(t, client(t, ""), prefix, cfg, nil)
			b, breg := newGuard(t, client(t, ""), prefix, cfg, nil)
			run(t, a)
			run(t, b)
			waitLoaded(t, a, b)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range tt.sends + tt.approvals {
				g := a
				if i%2 == 1 {
					g = b
				}
				wg.Go(func() {
					<-start
					var err error
					if i < tt.sends {
						err = g.Sent(context.Background(), "NG")
					} else {
						err = g.Approved(context.Background(), "NG")
					}
					if err != nil {
						t.Error(err)
					}
				})
			}
			close(start)
			wg.Wait()
			a.flush(context.Background())
			b.flush(context.Background())
			trips := metric(t, areg, "smsgw_pumping_trips_total", "country", "NG") +
				metric(t, breg, "smsgw_pumping_trips_total", "country", "NG")
			if trips != 1 {
				t.Fatalf("%v trips over both replicas, want exactly 1", trips)
			}
			list, err := a.List(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 1 || list[0].Country != "NG" || !tt.wantSends(list[0].Sends) {
				t.Fatalf("List = %+v", list)
			}
			for _, g := range []*Guard{a, b} {
				eventually(t, time.Second, func() bool { _, ok := g.Quarantined("NG"); return ok }, "both replicas hold NG")
			}
		})
	}
}

// TestReloadFindsQuarantinesWrittenBehindItsBack writes quarantine keys
// straight into Redis, announcing nothing: the reloads must find them.
func TestReloadFindsQuarantinesWrittenBehindItsBack(t *testing.T) {
	write := func(t *testing.T, rdb *redis.Client, g *Guard, country string, ttl time.Duration) {
		t.Helper()
		ctx := context.Background()
		if err := rdb.HSet(ctx, g.holdKey(country), "s", 40, "a", 1).Err(); err != nil {
			t.Fatal(err)
		}
		if ttl > 0 {
			if err := rdb.PExpire(ctx, g.holdKey(country), ttl).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	held := func(g *Guard, country string) func() bool {
		return func() bool { _, ok := g.Quarantined(country); return ok }
	}

	t.Run("first subscription loads what is there", func(t *testing.T) {
		rdb, prefix := testenv.Redis(t)
		cfg := testConfig()
		g, _ := newGuard(t, client(t, ""), prefix, cfg, nil)
		g.refresh = time.Hour
		write(t, rdb, g, "KE", 30*time.Minute)
		run(t, g)
		eventually(t, 2*time.Second, held(g, "KE"), "KE loaded on subscribe")
		wantHeld(t, g, "KE", 30*time.Minute)
		wantList(t, g, 30*time.Minute, otp.Quarantine{Country: "KE", Sends: 40, Approvals: 1})
	})

	t.Run("a resubscription reloads", func(t *testing.T) {
		rdb, prefix := testenv.Redis(t)
		name := "pumping-test-" + testenv.Unique()
		g, _ := newGuard(t, client(t, name), prefix, testConfig(), nil)
		g.refresh = time.Hour
		run(t, g)
		waitLoaded(t, g)
		write(t, rdb, g, "KE", 30*time.Minute)
		time.Sleep(200 * time.Millisecond)
		if held(g, "KE")() {
			t.Fatal("KE seen with no message, resubscription or refresh")
		}
		// Drop this guard's subscriber connection, and only it.
		ctx := context.Background()
		killed := 0
		for _, line := range strings.Split(rdb.ClientList(ctx).Val(), "\n") {
			f := map[string]string{}
			for _, kv := range strings.Fields(line) {
				k, v, _ := strings.Cut(kv, "=")
				f[k] = v
			}
			if f["name"] == name && f["sub"] == "1" {
				if err := rdb.ClientKillByFilter(ctx, "ID", f["id"]).Err(); err != nil {
					t.Fatal(err)
				}
				killed++
			}
		}
		if killed != 1 {
			t.Fatalf("killed %d subscriber connections, want 1", killed)
		}
		took := eventually(t, 5*time.Second, held(g, "KE"), "KE loaded on resubscribe")
		t.Logf("reloaded %v after the connection was killed", took)
		wantHeld(t, g, "KE", 30*time.Minute)
		if n := g.reloads.Load(); n != 2 {
			t.Fatalf("%d reloads, want 2 (subscribe, resubscribe)", n)
		}
	})

	t.Run("the periodic refresh adds and drops", func(t *testing.T) {
		rdb, prefix := testenv.Redis(t)
		cfg := testConfig()
		g, _ := newGuard(t, client(t, ""), prefix, cfg, nil)
		g.refresh = 50 * time.Millisecond
		run(t, g)
		waitLoaded(t, g)
		write(t, rdb, g, "KE", 30*time.Minute)
		write(t, rdb, g, "UG", 0) // no TTL: held until lifted
		eventually(t, 2*time.Second, held(g, "KE"), "KE loaded by a refresh")
		eventually(t, 2*time.Second, held(g, "UG"), "UG loaded by a refresh")
		wantHeld(t, g, "KE", 30*time.Minute)
		wantHeld(t, g, "UG", cfg.Quarantine)
		if err := rdb.Del(context.Background(), g.holdKey("KE")).Err(); err != nil {
			t.Fatal(err)
		}
		eventually(t, 2*time.Second, func() bool { return !held(g, "KE")() }, "KE dropped by a refresh")
		if !held(g, "UG")() {
			t.Fatal("UG dropped")
		}
	})
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
		want string // the key the error names; "" for valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"off", func(c *Config) { c.Mode = ModeOff }, ""},
		{"shadow", func(c *Config) { c.Mode = ModeShadow }, ""},
		{"ratio 0 is allowed", func(c *Config) { c.MinApprovalRatio = 0 }, ""},
		{"ratio 1 is allowed", func(c *Config) { c.MinApprovalRatio = 1 }, ""},
		{"unknown mode", func(c *Config) { c.Mode = "on" }, "pumping.mode"},
		{"empty mode", func(c *Config) { c.Mode = "" }, "pumping.mode"},
		{"no min sends", func(c *Config) { c.MinSends = 0 }, "pumping.min_sends"},
		{"negative ratio", func(c *Config) { c.MinApprovalRatio = -0.1 }, "pumping.min_approval_ratio"},
		{"ratio over 1", func(c *Config) { c.MinApprovalRatio = 1.5 }, "pumping.min_approval_ratio"},
		{"zero window", func(c *Config) { c.Window = 0 }, "pumping.window"},
		{"window not whole minutes", func(c *Config) { c.Window = 90 * time.Second }, "pumping.window"},
		{"zero quarantine", func(c *Config) { c.Quarantine = 0 }, "pumping.quarantine"},
		{"sub-second quarantine", func(c *Config) { c.Quarantine = 500 * time.Millisecond }, "pumping.quarantine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testConfig()
			tt.edit(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want+":")):
				t.Fatalf("error %v, want one naming %s", err, tt.want)
			}
		})
	}
}

// countingScripts counts the script calls that reached Redis.
type countingScripts struct {
	Scripts
	n atomic.Int64
}

func (c *countingScripts) Run(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	c.n.Add(1)
	return c.Scripts.Run(ctx, s, keys, args...)
}

// TestRunGathersCounts: while Run runs, a flood of texts to one country
// costs Redis one write per gathering period, and every text is counted.
func TestRunGathersCounts(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	cfg := testConfig()
	cfg.MinSends = 1_000_000 // never trips here
	scripts := &countingScripts{Scripts: redisbatch.New(rdb, redisbatch.Options{})}
	g := New(rdb, prefix, scripts, cfg, quiet, nil)
	run(t, g)
	eventually(t, time.Second, g.gathering.Load, "Run gathers")
	ctx := context.Background()
	for range 5000 {
		if err := g.Sent(ctx, "BR"); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 2*time.Second, func() bool {
		var total int64
		for _, v := range rdb.HGetAll(ctx, g.countsKey("BR")).Val() {
			n, _ := strconv.ParseInt(v, 10, 64)
			total += n
		}
		return total == 5000
	}, "all 5000 texts counted")
	if n := scripts.n.Load(); n > 20 {
		t.Fatalf("%d script calls for 5000 texts: counts were not gathered", n)
	}
}
