package api_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	vegeta "github.com/tsenart/vegeta/v12/lib"

	"smsgw/audit"
	"smsgw/internal/app"
	"smsgw/internal/app/apptest"
	"smsgw/internal/testenv"
	"smsgw/otp"
	"smsgw/pumping"
)

// HTTP load on real servers on loopback, driven by vegeta's library in the
// same process. BenchmarkHTTP runs three scenarios in one process, in this
// order, all against the same Redis (and the same Postgres for smsgw):
//
//	bare      a bare Echo handler doing one Redis INCR and answering 202 JSON:
//	          the baseline, what any handler on this stack costs at least
//	accepted  smsgw's real server (wired like cmd/smsgw serveHTTP), every
//	          request a fresh phone from a fresh IP: every one a 202 that runs
//	          the limiter, the fake provider and the Postgres audit writer
//	refused   the same server, one hot phone from one hot client IP (new
//	          ones per attack): the first request is a 202, every other one
//	          a 429, answered from the replica's refusal cache
//	accepted-after  accepted on a server that writes a send's one row after
//	          the provider call, durable before the answer (as smsgw did
//	          before a send's row was durable before its text)
//	*-async   the same two on a server that answers before the audit row
//	          is durable (as smsgw did before durable audit), so the cost of
//	          durability is measured in the same run
//
// The attacker is closed-loop: benchWorkers workers (SMSGW_BENCH_WORKERS,
// default 64), each sending its next request as soon as its last one is
// answered (vegeta rate 0, MaxWorkers), for the attack duration; that
// saturates 2 cores. With a closed loop, time a request spends waiting (for
// its audit row to be durable, say) shows as lost throughput unless there are
// enough workers to cover it: run with more workers to tell waiting from work.
//
// b.N is not a number of requests: one b.Loop iteration runs SMSGW_BENCH_ROUNDS
// rounds (default 3), each one attack of SMSGW_BENCH_ATTACK (default 2s) per
// scenario, in turn. The metrics are per scenario: req/s over all rounds, p99
// of the last round, and x-bare, the median over the rounds of the scenario's
// throughput divided by the bare run's in the same round. Run it with
// -benchtime 1x; ns/op is meaningless here.

// benchWorkers is SMSGW_BENCH_WORKERS (default 64): concurrent requests.
var benchWorkers = func() int {
	if n, err := strconv.Atoi(os.Getenv("SMSGW_BENCH_WORKERS")); err == nil && n > 0 {
		return n
	}
	return 64
}()

const (
	benchDefaultAttack = 2 * time.Second
	benchAttackEnv     = "SMSGW_BENCH_ATTACK"
	benchSendPath      = "/v1/otp/send"
	benchAuditDrain    = time.Minute
)

func benchAttackDuration(b *testing.B) time.Duration {
	s := os.Getenv(benchAttackEnv)
	if s == "" {
		return benchDefaultAttack
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		b.Fatalf("%s=%q: want a positive Go duration such as 5s", benchAttackEnv, s)
	}
	return d
}

// Fresh identities. Phones are valid US numbers in ten area codes (none of
// them 650, which the hot phones use); IPs are 10/8 addresses, which the
// server does not trust as proxies, so X-Forwarded-For names the client.
var (
	benchPhoneSeq, benchIPSeq, benchHotSeq atomic.Uint64
	benchAreaCodes                         = [...]string{"206", "212", "213", "310", "312", "415", "617", "702", "718", "646"}
)

// benchUSPhone is the i-th of 80 million distinct valid numbers.
func benchUSPhone(i uint64) string {
	npa := benchAreaCodes[(i/8_000_000)%uint64(len(benchAreaCodes))]
	nxx := 200 + (i/10_000)%800
	return fmt.Sprintf("+1%s%03d%04d", npa, nxx, i%10_000)
}

func benchPhone() string { return benchUSPhone(benchPhoneSeq.Add(1)) }

// benchHotPhone is a number no fresh phone ever is.
func benchHotPhone() string { return fmt.Sprintf("+1650253%04d", benchHotSeq.Add(1)%10_000) }

func benchIP() string {
	n := benchIPSeq.Add(1)
	return netip.AddrFrom4([4]byte{10, byte(n >> 16), byte(n >> 8), byte(n)}).String()
}

// benchTargeter sends POST /v1/otp/send for phone() from client ip().
func benchTargeter(url string, phone, ip func() string) vegeta.Targeter {
	return func(t *vegeta.Target) error {
		t.Method = http.MethodPost
		t.URL = url + benchSendPath
		t.Body = []byte(`{"phone":"` + phone() + `"}`)
		t.Header = http.Header{
			"Content-Type":    {"application/json"},
			"X-Forwarded-For": {ip()},
		}
		return nil
	}
}

// benchScenarioResult is what one scenario measured over all its attacks.
type benchScenarioResult struct {
	requests uint64
	wall     time.Duration // attack time, from the first request to the last answer
	lat      vegeta.LatencyMetrics
	codes    map[string]int
}

func (r benchScenarioResult) rate() float64 { return float64(r.requests) / r.wall.Seconds() }

// BenchmarkHTTP runs the bare, accepted and refused scenarios (see above) and
// logs a table with the throughput ratios to bare when all three ran.
func BenchmarkHTTP(b *testing.B) {
	dur := benchAttackDuration(b)
	ctx := context.Background()

	// Redis, configured as cmd/smsgw newRedis does with the default config.
	_, prefix := testenv.Redis(b) // checks Redis is up; deletes leftovers last
	opt, err := redis.ParseURL(testenv.RedisURL())
	if err != nil {
		b.Fatal(err)
	}
	const redisTimeout = 500 * time.Millisecond
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout, opt.PoolTimeout = redisTimeout, redisTimeout, redisTimeout, redisTimeout
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries = -1
	rdb := redis.NewClient(opt)
	b.Cleanup(func() { rdb.Close() }) // testenv deletes the keys under prefix

	// Postgres: a fresh database with the schema, and the audit writer.
	pool := testenv.Pool(b)

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	reg := prometheus.NewRegistry()
	// Durable before answered, with a spool, as the service runs it.
	writer, err := audit.NewWriter(pool, audit.Options{Metrics: reg, SpoolDir: b.TempDir()}, log)
	if err != nil {
		b.Fatal(err)
	}
	go writer.Run(ctx) // Close ends it and waits
	b.Cleanup(func() {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := writer.Close(cctx); err != nil {
			b.Errorf("audit writer: %v", err)
		}
	})

	// smsgw built by the composition root from the defaults of config.toml
	// (refusal cache on), with 127.0.0.0/8 trusted as a proxy, except that
	// the pumping guard only shadows: every request texts a fresh number
	// nobody verifies, which is what enforce mode exists to refuse. Shadow
	// mode runs the same Redis script.
	shadow := pumping.DefaultConfig()
	shadow.Mode = pumping.ModeShadow
	shipped := func(c *app.Config) {
		c.Server.TrustedProxies = []string{"127.0.0.0/8", "::1/128"}
		c.Limits.LocalRefusalCache = 100000
	}
	smsgwURL := apptest.New(b, apptest.Options{Redis: rdb, Prefix: prefix + "smsgw:", Config: shipped, Pumping: &shadow, AuditLog: writer}).URL
	// The same service answering before its audit row is durable, as before
	// durable audit: what durability costs is the difference.
	asyncURL := apptest.New(b, apptest.Options{Redis: rdb, Prefix: prefix + "smsgw:", Config: shipped, Pumping: &shadow, AuditLog: asyncAudit{writer}}).URL
	// The same service with one durable row per send written after the
	// provider call (as before a send's row was durable before its text):
	// what writing it first costs is the difference.
	afterURL := apptest.New(b, apptest.Options{Redis: rdb, Prefix: prefix + "smsgw:", Config: shipped, Pumping: &shadow, AuditLog: afterText{writer}}).URL
	bareURL := startBenchServer(b, benchBareHandler(rdb, prefix+"bare:count"))

	// Every fresh phone must be one the service accepts.
	for _, i := range []uint64{0, 1, 9_999, 10_000, 7_999_999, 8_000_000, 79_999_999} {
		if _, err := otp.ParsePhone(benchUSPhone(i), "US"); err != nil {
			b.Fatalf("fresh phone %s: %v", benchUSPhone(i), err)
		}
	}
	if _, err := otp.ParsePhone(benchHotPhone(), "US"); err != nil {
		b.Fatalf("hot phone: %v", err)
	}

	// audited counts the requests smsgw answered, so each attack can wait for
	// their audit rows before the next one starts.
	var audited int
	waitForAudit := func(b *testing.B) {
		testenv.WaitUntil(b, benchAuditDrain, "the audit trail's count", func() error {
			var n int
			if err := pool.QueryRow(ctx, "SELECT coalesce(sum(count), 0) FROM audit_log").Scan(&n); err != nil {
				b.Fatal(err)
			}
			if n > audited {
				b.Fatalf("audit_log counts %d requests, want %d", n, audited)
			}
			if n != audited {
				return fmt.Errorf("audit_log counts %d requests, want %d", n, audited)
			}
			return nil
		})
	}

	results := map[string]benchScenarioResult{}
	scenarios := []struct {
		name string
		url  string
		// phone and ip are called once per attack for its generators.
		phone, ip func() func() string
		// check returns why the attack's status codes are wrong, or "".
		check func(codes map[string]int, requests uint64) string
	}{
		{"bare", bareURL, fresh(benchPhone), fresh(benchIP), benchAllStatus("202")},
		{"accepted", smsgwURL, fresh(benchPhone), fresh(benchIP), benchAllStatus("202")},
		{"accepted-after", afterURL, fresh(benchPhone), fresh(benchIP), benchAllStatus("202")},
		{"accepted-async", asyncURL, fresh(benchPhone), fresh(benchIP), benchAllStatus("202")},
		{"refused", smsgwURL, hot(benchHotPhone), hot(benchIP), func(codes map[string]int, requests uint64) string {
			if codes["202"] != 1 || uint64(codes["429"]) != requests-1 {
				return "want exactly one 202 and 429 for the rest"
			}
			return ""
		}},
		{"refused-async", asyncURL, hot(benchHotPhone), hot(benchIP), func(codes map[string]int, requests uint64) string {
			if codes["202"] != 1 || uint64(codes["429"]) != requests-1 {
				return "want exactly one 202 and 429 for the rest"
			}
			return ""
		}},
	}
	// Rounds interleave the scenarios (bare, accepted, refused, bare, ...) so
	// that the machine's drift from minute to minute, which on a shared
	// 2-core machine is larger than the differences measured, hits every
	// scenario alike; each round gives a ratio to its own bare run, and the
	// median of those is reported.
	rounds := testenv.BenchRounds(b, 3)
	ratios := map[string][]float64{}
	for b.Loop() {
		for round := 0; round < rounds; round++ {
			var bareRate float64
			for _, sc := range scenarios {
				var m vegeta.Metrics
				atk := vegeta.NewAttacker(
					vegeta.Workers(uint64(benchWorkers)), vegeta.MaxWorkers(uint64(benchWorkers)),
					vegeta.Connections(benchWorkers), vegeta.KeepAlive(true),
					vegeta.Timeout(30*time.Second))
				for r := range atk.Attack(benchTargeter(sc.url, sc.phone(), sc.ip()), vegeta.ConstantPacer{}, dur, sc.name) {
					m.Add(r)
				}
				m.Close()
				if m.Requests == 0 {
					b.Fatal("the attack sent no request")
				}
				if why := sc.check(m.StatusCodes, m.Requests); why != "" {
					b.Fatalf("%s: %d requests, status codes %v: %s; errors: %v", sc.name, m.Requests, m.StatusCodes, why, benchFirstN(m.Errors, 5))
				}
				res := results[sc.name]
				res.requests += m.Requests
				res.wall += m.Duration + m.Wait
				res.lat = m.Latencies // the last round's percentiles
				if res.codes == nil {
					res.codes = map[string]int{}
				}
				for c, n := range m.StatusCodes {
					res.codes[c] += n
				}
				results[sc.name] = res
				rate := float64(m.Requests) / (m.Duration + m.Wait).Seconds()
				if sc.name == "bare" {
					bareRate = rate
				} else {
					ratios[sc.name] = append(ratios[sc.name], rate/bareRate)
				}
				if sc.url != bareURL {
					audited += int(m.Requests)
					waitForAudit(b)
				}
			}
		}
	}
	for _, sc := range scenarios {
		r := results[sc.name]
		b.ReportMetric(r.rate(), sc.name+"-req/s")
		b.ReportMetric(benchMS(r.lat.P99), sc.name+"-p99-ms")
		if sc.name != "bare" {
			b.ReportMetric(testenv.Median(ratios[sc.name]), sc.name+"-x-bare")
		}
	}
	// What a send's row written before its text costs: accepted over
	// accepted-after, round by round (each against the same bare run).
	var first []float64
	for i := range ratios["accepted"] {
		first = append(first, ratios["accepted"][i]/ratios["accepted-after"][i])
	}
	b.ReportMetric(testenv.Median(first), "accepted-x-after")
	b.Logf("accepted / accepted-after per round: %.2f (median %.2f)", first, testenv.Median(first))
	logBenchTable(b, results, ratios, []string{"bare", "accepted", "accepted-after", "accepted-async", "refused", "refused-async"})
}

// asyncAudit hands rows to the writer without waiting for them to be
// durable: how the service answered before durable audit.
type asyncAudit struct{ w *audit.Writer }

func (a asyncAudit) Record(ctx context.Context, e otp.AuditEvent) error {
	go a.w.Record(context.WithoutCancel(ctx), e)
	return nil
}

func (a asyncAudit) Finish(e otp.AuditEvent) { a.w.Finish(e) }

func (a asyncAudit) Note(e otp.AuditEvent, subject string) { a.w.Note(e, subject) }

func (a asyncAudit) Accepting() error { return a.w.Accepting() }

// afterText writes a send's row once, durable before the answer but after
// the provider call: its "sending" row is skipped and its final outcome
// waited for. How smsgw wrote rows before every text had one first.
type afterText struct{ w *audit.Writer }

func (a afterText) Record(ctx context.Context, e otp.AuditEvent) error {
	if e.Outcome == otp.OutcomeSending {
		return nil
	}
	return a.w.Record(ctx, e)
}

func (a afterText) Finish(e otp.AuditEvent) { _ = a.w.Record(context.Background(), e) }

func (a afterText) Note(e otp.AuditEvent, _ string) { _ = a.w.Record(context.Background(), e) }

func (a afterText) Accepting() error { return a.w.Accepting() }

// fresh makes a generator of a new value every call.
func fresh(next func() string) func() func() string {
	return func() func() string { return next }
}

// hot makes a generator of one value, new for each attack.
func hot(next func() string) func() func() string {
	return func() func() string {
		v := next()
		return func() string { return v }
	}
}

func benchAllStatus(code string) func(map[string]int, uint64) string {
	return func(codes map[string]int, requests uint64) string {
		if uint64(codes[code]) != requests {
			return "want " + code + " for every request"
		}
		return ""
	}
}

func logBenchTable(b *testing.B, results map[string]benchScenarioResult, ratios map[string][]float64, order []string) {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d workers, GOMAXPROCS=%d, rounds interleaved; x-bare is the median of the rounds' ratios\n", benchWorkers, runtime.GOMAXPROCS(0))
	fmt.Fprintf(&sb, "%-15s %9s %8s %8s %7s  %-20s %s\n", "scenario", "req/s", "p50-ms", "p99-ms", "x-bare", "rounds", "status codes")
	for _, name := range order {
		r := results[name]
		codes := make([]string, 0, len(r.codes))
		for c, n := range r.codes {
			codes = append(codes, c+":"+strconv.Itoa(n))
		}
		slices.Sort(codes)
		x, each := 1.0, ""
		if name != "bare" {
			x = testenv.Median(ratios[name])
			for _, v := range ratios[name] {
				each += fmt.Sprintf("%.2f ", v)
			}
		}
		fmt.Fprintf(&sb, "%-15s %9.0f %8.2f %8.2f %7.2f  %-20s %s\n", name, r.rate(), benchMS(r.lat.P50), benchMS(r.lat.P99), x, each, strings.Join(codes, " "))
	}
	b.Log("\n" + sb.String())
}

func benchMS(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func benchFirstN(s []string, n int) []string { return s[:min(n, len(s))] }

// startBenchServer serves h on loopback with the http.Server settings of
// cmd/smsgw serveHTTP.
func startBenchServer(b *testing.B, h http.Handler) string {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ReadHeaderTimeout = 5 * time.Second
	srv.Config.ReadTimeout = 15 * time.Second
	srv.Config.WriteTimeout = 30 * time.Second
	srv.Config.IdleTimeout = 2 * time.Minute
	srv.Config.MaxHeaderBytes = 64 << 10
	srv.Start()
	b.Cleanup(srv.Close)
	return srv.URL
}

// benchBareHandler is the baseline: Echo v4, one Redis round trip, 202 JSON.
func benchBareHandler(rdb *redis.Client, key string) http.Handler {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.POST(benchSendPath, func(c echo.Context) error {
		n, err := rdb.Incr(c.Request().Context(), key).Result()
		if err != nil {
			return echo.NewHTTPError(http.StatusServiceUnavailable, err.Error())
		}
		_, _ = io.Copy(io.Discard, c.Request().Body)
		return c.JSON(http.StatusAccepted, map[string]any{"status": "pending", "n": n})
	})
	return e
}
