// Package benchhttp measures smsgw's HTTP paths from outside: wrk, a separate
// process, against the built binary (the shipped defaults: the mission's
// limits, durable audit in Postgres) and against two baselines in the same
// run, round after round, so the machine's drift hits all alike.
//
//	make bench-http                      # 5 rounds of 5 s per scenario
//	SMSGW_BENCH_ROUNDS=7 SMSGW_BENCH_ATTACK=10s make bench-http
package benchhttp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/redis/go-redis/v9"

	"smsgw/audit"
	"smsgw/internal/testenv"
	"smsgw/otp"
)

// scenario is one wrk run per round.
type scenario struct {
	name, url, path, mode string
	// base is the baseline this scenario is divided by ("" for a baseline),
	// floor the one it is also shown against ("" for none).
	base, floor string
	// check says what is wrong with the status codes wrk saw, or "".
	check func(codes map[int]int) string
	// codesOf names the scenario, earlier in the round, whose texts this
	// one verifies (mode "verify").
	codesOf string
}

// result is what one wrk run measured.
type result struct {
	rate     float64
	p50, p99 time.Duration
	codes    map[int]int
	// cpu is the CPU time per request of each process group (see cpuNow)
	// while the run lasted.
	cpu map[string]time.Duration
}

func BenchmarkWrk(b *testing.B) {
	if _, err := exec.LookPath("wrk"); err != nil {
		b.Fatal("wrk is not installed (make bench-http installs it with apt-get)")
	}
	rounds := envInt(b, "SMSGW_BENCH_ROUNDS", 5)
	attack := envDuration(b, "SMSGW_BENCH_ATTACK", 5*time.Second)
	conns := envInt(b, "SMSGW_BENCH_CONNECTIONS", 64)

	rdb, prefix := testenv.Redis(b)
	dsn := testenv.MigratedDatabase(b)
	// The pumping rules in shadow mode: every request texts a fresh number
	// nobody verifies, which enforce mode exists to refuse; shadow runs the
	// same Redis script.
	smsgwURL := startSmsgw(b, prefix+"smsgw:", dsn, "[pumping]\nmode = \"shadow\"\n")
	baseURL := startBaselines(b, rdb, prefix+"bare:", dsn)
	// SMSGW_BENCH_BEFORE names another tree of the module (e.g. `git archive
	// main` unpacked): its binary's accepted path runs in the same rounds,
	// for a before/after in one run.
	before := os.Getenv("SMSGW_BENCH_BEFORE")
	var beforeURL string
	if before != "" {
		// SMSGW_BENCH_BEFORE_CONFIG is more config for that binary alone:
		// with SMSGW_BENCH_BEFORE a tree of this same commit, it prices one
		// setting, e.g. a webhook whose receiver is down.
		more := strings.ReplaceAll(os.Getenv("SMSGW_BENCH_BEFORE_CONFIG"), `\n`, "\n")
		beforeURL = startSmsgwFrom(b, before, prefix+"before:", testenv.MigratedDatabase(b), mergeTOML("[pumping]\nmode = \"shadow\"\n", more))
	}
	script, err := filepath.Abs("send.lua")
	if err != nil {
		b.Fatal(err)
	}

	allOK := func(want int) func(map[int]int) string {
		return func(codes map[int]int) string {
			for c, n := range codes {
				if c != want && n > 0 {
					return fmt.Sprintf("%d answers %d, want only %d", n, c, want)
				}
			}
			return ""
		}
	}
	scenarios := []scenario{
		{name: "baseline-redis", url: baseURL, path: "/redis", mode: "fresh", check: allOK(202)},
		{name: "floor-202-rows", url: baseURL, path: "/redis-audited", mode: "fresh", check: allOK(202)},
		{name: "accepted", url: smsgwURL, path: "/v1/otp/send", mode: "fresh", base: "baseline-redis", floor: "floor-202-rows", check: allOK(202)},
	}
	if before != "" {
		scenarios = append(scenarios, scenario{name: "accepted-before", url: beforeURL, path: "/v1/otp/send", mode: "fresh",
			base: "baseline-redis", floor: "floor-202-rows", check: allOK(202)})
	}
	// Accepted verifies: each verifies, from a new address, the code of a
	// text its binary sent in the accepted scenario of the same round, read
	// from the fake provider's outbox: the real path (the code checked in
	// Redis, the verification record approved, its event written), which a
	// test number's fixed code would skip.
	scenarios = append(scenarios, scenario{name: "verify", url: smsgwURL, path: "/v1/otp/verify", mode: "verify",
		base: "baseline-redis", check: allOK(200), codesOf: "accepted"})
	if before != "" {
		scenarios = append(scenarios, scenario{name: "verify-before", url: beforeURL, path: "/v1/otp/verify", mode: "verify",
			base: "baseline-redis", check: allOK(200), codesOf: "accepted-before"})
	}
	scenarios = append(scenarios, []scenario{
		{name: "baseline-429", url: baseURL, path: "/refuse", mode: "hot", check: allOK(429)},
		{name: "floor-429-row", url: baseURL, path: "/refuse-audited", mode: "hot", check: allOK(429)},
		{name: "refused", url: smsgwURL, path: "/v1/otp/send", mode: "hot", base: "baseline-429", floor: "floor-429-row", check: refusedCodes},
	}...)
	if before != "" {
		scenarios = append(scenarios, scenario{name: "refused-before", url: beforeURL, path: "/v1/otp/send", mode: "hot",
			base: "baseline-429", floor: "floor-429-row", check: refusedCodes})
	}
	// SMSGW_BENCH_SCENARIOS runs only the scenarios it names (comma
	// separated), e.g. "baseline-429,refused,refused-before" for the
	// refused path alone; a scenario's base and floor run with it.
	if only := os.Getenv("SMSGW_BENCH_SCENARIOS"); only != "" {
		scenarios = pickScenarios(b, scenarios, strings.Split(only, ","))
	}

	ratios := map[string][]float64{}
	floors := map[string][]float64{}
	rates := map[string][]float64{}
	cpus := map[string]map[string][]float64{} // scenario -> process -> µs per request
	last := map[string]result{}
	base := 0
	for b.Loop() {
		for round := range rounds {
			got := map[string]result{}
			codes := map[string]string{} // scenario → file of the codes it texted
			for _, sc := range scenarios {
				base += 4_000_000
				var file string
				if sc.codesOf != "" {
					file = codes[sc.codesOf]
				}
				start := time.Now()
				r := runWrk(b, script, sc, base, attack, conns, file)
				if slices.ContainsFunc(scenarios, func(v scenario) bool { return v.codesOf == sc.name }) {
					codes[sc.name] = textedCodes(b, sc.url, start)
				}
				if why := sc.check(r.codes); why != "" {
					b.Fatalf("round %d, %s: %s", round+1, sc.name, why)
				}
				got[sc.name], last[sc.name] = r, r
				rates[sc.name] = append(rates[sc.name], r.rate)
				if cpus[sc.name] == nil {
					cpus[sc.name] = map[string][]float64{}
				}
				for proc, d := range r.cpu {
					cpus[sc.name][proc] = append(cpus[sc.name][proc], float64(d)/float64(time.Microsecond))
				}
				if sc.base != "" {
					ratios[sc.name] = append(ratios[sc.name], r.rate/got[sc.base].rate)
				}
				if sc.floor != "" {
					floors[sc.name] = append(floors[sc.name], r.rate/got[sc.floor].rate)
				}
			}
			b.Logf("round %d: %s", round+1, roundLine(scenarios, got))
		}
	}
	b.Logf("wrk -t2 -c%d, %d rounds of %s per scenario, interleaved; medians:", conns, rounds, attack)
	b.Logf("%-15s %10s %9s %9s %8s %8s", "scenario", "req/s", "p50", "p99", "x base", "x floor")
	for _, sc := range scenarios {
		x, f := "1.00", ""
		if sc.base != "" {
			x = fmt.Sprintf("%.2f", median(ratios[sc.name]))
			b.ReportMetric(median(ratios[sc.name]), sc.name+"-x-base")
		}
		if sc.floor != "" {
			f = fmt.Sprintf("%.2f", median(floors[sc.name]))
			b.ReportMetric(median(floors[sc.name]), sc.name+"-x-floor")
		}
		b.ReportMetric(median(rates[sc.name]), sc.name+"-req/s")
		b.Logf("%-15s %10.0f %9s %9s %8s %8s", sc.name, median(rates[sc.name]),
			last[sc.name].p50.Round(10*time.Microsecond), last[sc.name].p99.Round(10*time.Microsecond), x, f)
	}
	b.Logf("CPU per request (median µs; wrk's own not counted; the baselines run in the benchmark's process):")
	for _, sc := range scenarios {
		var parts []string
		for _, proc := range []string{"smsgw", "baselines", "redis", "postgres"} {
			if xs := cpus[sc.name][proc]; len(xs) > 0 && median(xs) >= 1 {
				parts = append(parts, fmt.Sprintf("%s %.0f", proc, median(xs)))
			}
		}
		b.Logf("%-15s %s", sc.name, strings.Join(parts, ", "))
	}
}

// refusedCodes checks a refused scenario: its hot pair's first send may be
// admitted, every other answer is a 429.
func refusedCodes(codes map[int]int) string {
	total := 0
	for _, n := range codes {
		total += n
	}
	if codes[202] > 1 || codes[429] != total-codes[202] {
		return fmt.Sprintf("codes %v, want one 202 at most and 429 for the rest", codes)
	}
	return ""
}

// pickScenarios keeps the named scenarios, their bases and floors, and
// the scenarios whose texts they verify, in their order.
func pickScenarios(b *testing.B, all []scenario, names []string) []scenario {
	b.Helper()
	keep := map[string]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		i := slices.IndexFunc(all, func(sc scenario) bool { return sc.name == n })
		if i < 0 {
			b.Fatalf("SMSGW_BENCH_SCENARIOS: no scenario %q", n)
		}
		keep[n] = true
		for _, dep := range []string{all[i].base, all[i].floor, all[i].codesOf} {
			if dep != "" {
				keep[dep] = true
			}
		}
	}
	var out []scenario
	for _, sc := range all {
		if keep[sc.name] {
			out = append(out, sc)
		}
	}
	return out
}

// processGroups names the processes cpuNow counts, by their command name.
var processGroups = map[string]string{"smsgw": "smsgw", "redis-server": "redis", "postgres": "postgres"}

// cpuNow is the CPU time (user and system) used so far by the processes
// a scenario runs on, from /proc: smsgw, the benchmark's own process (the
// baselines), Redis and Postgres (every backend), at Linux's usual 100
// ticks a second. A process that exits meanwhile is not counted.
func cpuNow() map[string]time.Duration {
	out := map[string]time.Duration{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	self := strconv.Itoa(os.Getpid())
	for _, dir := range dirs {
		stat, err := os.ReadFile(filepath.Join(dir, "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... utime stime: the 14th and 15th fields.
		lp, rp := strings.IndexByte(string(stat), '('), strings.LastIndexByte(string(stat), ')')
		if lp < 0 || rp < lp {
			continue
		}
		comm, rest := stat[lp+1:rp], strings.Fields(string(stat[rp+1:]))
		if len(rest) < 13 {
			continue
		}
		proc := processGroups[string(comm)]
		if proc == "redis" && !servesTestRedis(dir) {
			continue
		}
		if filepath.Base(dir) == self {
			proc = "baselines"
		}
		if proc == "" {
			continue
		}
		utime, _ := strconv.ParseInt(rest[11], 10, 64)
		stime, _ := strconv.ParseInt(rest[12], 10, 64)
		out[proc] += time.Duration(utime+stime) * 10 * time.Millisecond
	}
	return out
}

// servesTestRedis says whether the redis-server at /proc dir is the one
// the benchmark runs on (other tests' servers share the machine).
func servesTestRedis(dir string) bool {
	u, err := url.Parse(testenv.RedisURL())
	if err != nil {
		return true
	}
	cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	return err == nil && strings.Contains(string(cmdline), ":"+u.Port())
}

func roundLine(scenarios []scenario, got map[string]result) string {
	var parts []string
	for _, sc := range scenarios {
		r := got[sc.name]
		parts = append(parts, fmt.Sprintf("%s %.0f/s p99 %s", sc.name, r.rate, r.p99.Round(100*time.Microsecond)))
	}
	return strings.Join(parts, ", ")
}

var (
	rateRE   = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	statusRE = regexp.MustCompile(`(?m)^status (\d+) (\d+)$`)
	pctRE    = regexp.MustCompile(`(?m)^p(50|99) (\d+)$`)
)

// runWrk runs one attack as its own process and reads its report; codes is
// the file of "phone code" lines a verify scenario takes.
func runWrk(b *testing.B, script string, sc scenario, base int, attack time.Duration, conns int, codes string) result {
	b.Helper()
	const threads = 2
	cmd := exec.Command("wrk", "-t"+strconv.Itoa(threads), "-c"+strconv.Itoa(conns), "-d"+strconv.Itoa(int(attack/time.Second))+"s",
		"--timeout", "10s", "-s", script, sc.url, "--", sc.path, sc.mode, strconv.Itoa(base), codes, strconv.Itoa(threads))
	before := cpuNow()
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("wrk: %v\n%s", err, out)
	}
	after := cpuNow()
	m := rateRE.FindSubmatch(out)
	if m == nil {
		b.Fatalf("wrk said no rate:\n%s", out)
	}
	r := result{codes: map[int]int{}}
	r.rate, _ = strconv.ParseFloat(string(m[1]), 64)
	for _, s := range statusRE.FindAllSubmatch(out, -1) {
		c, _ := strconv.Atoi(string(s[1]))
		n, _ := strconv.Atoi(string(s[2]))
		r.codes[c] += n
	}
	for _, p := range pctRE.FindAllSubmatch(out, -1) {
		us, _ := strconv.Atoi(string(p[2]))
		if string(p[1]) == "50" {
			r.p50 = time.Duration(us) * time.Microsecond
		} else {
			r.p99 = time.Duration(us) * time.Microsecond
		}
	}
	total := 0
	for _, n := range r.codes {
		total += n
	}
	r.cpu = map[string]time.Duration{}
	for proc, d := range after {
		if total > 0 {
			r.cpu[proc] = (d - before[proc]) / time.Duration(total)
		}
	}
	if strings.Contains(string(out), "Socket errors") {
		b.Fatalf("%s: wrk saw socket errors:\n%s", sc.name, out)
	}
	return r
}

// benchAdminToken opens the fake provider's outbox (GET /v1/fake/messages).
const benchAdminToken = "bench-admin-token-0123456789abcdefghijklmnop"

// codeRE finds the code in a text of the shipped English template.
var codeRE = regexp.MustCompile(`code is (\d+)`)

// textedCodes writes to a file, one "phone code" line each, the codes of
// the texts smsgw at url sent since start, read from its fake provider's
// outbox, and returns the file's path.
func textedCodes(b *testing.B, url string, start time.Time) string {
	b.Helper()
	req, err := http.NewRequest(http.MethodGet, url+"/v1/fake/messages", nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+benchAdminToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	var texts []struct {
		To     string    `json:"to"`
		Body   string    `json:"body"`
		SentAt time.Time `json:"sent_at"`
	}
	if res.StatusCode != http.StatusOK {
		b.Fatalf("GET /v1/fake/messages: %s", res.Status)
	}
	if err := json.NewDecoder(res.Body).Decode(&texts); err != nil {
		b.Fatal(err)
	}
	var lines strings.Builder
	n := 0
	for _, t := range texts {
		m := codeRE.FindStringSubmatch(t.Body)
		if t.SentAt.Before(start) || m == nil {
			continue
		}
		fmt.Fprintf(&lines, "%s %s\n", t.To, m[1])
		n++
	}
	if n == 0 {
		b.Fatalf("no text with a code sent by %s since %s", url, start.Format(time.RFC3339Nano))
	}
	f, err := os.CreateTemp(b.TempDir(), "codes")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(lines.String()); err != nil {
		b.Fatal(err)
	}
	return f.Name()
}

// startSmsgw builds the binary and runs it with the shipped defaults, except
// the addresses, its own key prefix and database, loopback trusted as a
// proxy (so X-Forwarded-For names the fresh clients), the fake provider
// (the defaults name none), and the keys of overrides (TOML).
func startSmsgw(b *testing.B, prefix, dsn, overrides string) string {
	return startSmsgwFrom(b, "", prefix, dsn, overrides)
}

// startSmsgwFrom is startSmsgw with the binary built from the module in src
// ("" this one).
func startSmsgwFrom(b *testing.B, src, prefix, dsn, overrides string) string {
	b.Helper()
	dir := b.TempDir()
	bin := filepath.Join(dir, "smsgw")
	build := exec.Command("go", "build", "-o", bin, "smsgw/cmd/smsgw")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	addr := freeAddr(b)
	cfg := fmt.Sprintf(`[server]
listen = %q
trusted_proxies = ["127.0.0.0/8"]
[log]
level = "error"
[redis]
url = %q
key_prefix = %q
[postgres]
url = %q
[audit]
spool_dir = %q
[sender]
provider = "fake"
[sender.fake]
outbox_size = 100000
[pumping]
mode = "enforce"
`, addr, testenv.RedisURL(), prefix, dsn, filepath.Join(dir, "spool"))
	cfg = mergeTOML(cfg, overrides)
	// SMSGW_BENCH_CONFIG replaces keys above, to see what one costs: e.g.
	// '[pumping]\nmode = "off"'.
	if extra := os.Getenv("SMSGW_BENCH_CONFIG"); extra != "" {
		cfg = mergeTOML(cfg, strings.ReplaceAll(extra, `\n`, "\n"))
	}
	path := filepath.Join(dir, "smsgw.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	return serve(b, bin, path, addr)
}

// serve runs the binary with the config at path, listening on addr, until
// the benchmark ends, and returns its URL once it is ready.
func serve(b *testing.B, bin, path, addr string) string {
	b.Helper()
	cmd := exec.Command(bin, "-config", path)
	cmd.Env = append(os.Environ(), "SMSGW_SECRET=bench-secret-0123456789abcdefghijklmnop", "SMSGW_ADMIN_TOKEN="+benchAdminToken)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	b.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	url := "http://" + addr
	testenv.WaitFor(b, 60*time.Second, "smsgw to be ready", func() bool {
		select {
		case <-exited:
			b.Fatal("smsgw exited before it was ready")
		default:
		}
		return testenv.GetOK(url + "/readyz")
	})
	return url
}

// startBaselines serves the baselines on one Echo server in this process:
// POST /redis does one Redis round trip and answers 202 JSON, what any
// handler on this stack that touches Redis costs at least; POST /refuse
// answers 429 JSON with Retry-After, what any refusal costs at least; POST
// /refuse-audited first notes its audit record through smsgw's own writer
// (its own row until the subject's share, then a count on the subject's
// rollup, written every second into the same Postgres database), what any
// refusal that keeps the SPEC's record costs at least: the floor of the
// refused path.
// POST /redis-audited is /redis with a send's two audit writes around it (a
// durable "sending" row, then its final outcome), what any accepted send
// that keeps the SPEC's rows costs at least before it decides anything.
func startBaselines(b *testing.B, rdb *redis.Client, prefix, dsn string) string {
	b.Helper()
	pool := testenv.PoolOn(b, dsn)
	rows, err := audit.NewWriter(pool, audit.Options{}, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	rows.SetPostgresReady(true)
	go rows.Run(context.Background()) // Close ends it and waits
	// Cleanups run last first: the writer closes before its pool.
	b.Cleanup(func() { rows.Close(context.Background()) })
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	count := func(c echo.Context) error {
		n, err := rdb.Incr(c.Request().Context(), prefix+"count").Result()
		if err != nil {
			return err
		}
		return c.JSON(http.StatusAccepted, map[string]any{"id": n, "status": "pending"})
	}
	refuse := func(c echo.Context) error {
		c.Response().Header().Set("Retry-After", "60")
		return c.JSON(http.StatusTooManyRequests, map[string]any{"error": map[string]any{"code": "rate_limited", "retry_after": 60}})
	}
	row := func(outcome string) otp.AuditEvent {
		return otp.AuditEvent{ID: uuid.Must(uuid.NewV7()).String(), Time: time.Now().UTC(), Kind: otp.KindSend,
			Outcome: outcome, RequestID: "bench", Phone: "+14155550100"}
	}
	e.POST("/redis", count)
	e.POST("/refuse", refuse)
	e.POST("/redis-audited", func(c echo.Context) error {
		ev := row(otp.OutcomeSending)
		if err := rows.Record(c.Request().Context(), ev); err != nil {
			return err
		}
		if err := count(c); err != nil {
			return err
		}
		ev.Outcome, ev.Provider, ev.MessageID = otp.OutcomeSent, "fake", ev.ID
		rows.Finish(ev)
		return nil
	})
	e.POST("/refuse-audited", func(c echo.Context) error {
		rows.Note(row(otp.ERateLimited), "phone:+14155550100")
		return refuse(c)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: e}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Shutdown(context.Background()) })
	return "http://" + ln.Addr().String()
}

// mergeTOML puts extra's keys into base, table by table (a key extra sets
// replaces base's; a table base lacks is added).
func mergeTOML(base, extra string) string {
	table := ""
	keys := map[string][]string{} // table -> lines
	var order []string
	for _, line := range strings.Split(extra, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
		case strings.HasPrefix(line, "["):
			table = line
		default:
			if _, ok := keys[table]; !ok {
				order = append(order, table)
			}
			keys[table] = append(keys[table], line)
		}
	}
	var out []string
	table = ""
	flush := func() {
		out = append(out, keys[table]...)
		delete(keys, table)
	}
	for _, line := range strings.Split(base, "\n") {
		if strings.HasPrefix(line, "[") {
			flush()
			table = line
			out = append(out, line)
			continue
		}
		if k, _, ok := strings.Cut(line, "="); ok && slices.ContainsFunc(keys[table], func(e string) bool {
			ek, _, _ := strings.Cut(e, "=")
			return strings.TrimSpace(ek) == strings.TrimSpace(k)
		}) {
			continue
		}
		out = append(out, line)
	}
	flush()
	for _, t := range order {
		if lines, ok := keys[t]; ok {
			out = append(append(out, t), lines...)
		}
	}
	return strings.Join(out, "\n") + "\n"
}

func freeAddr(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func envInt(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive whole number", name, s)
	}
	return n
}

func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Second {
		b.Fatalf("%s=%q: want a duration of at least 1s", name, s)
	}
	return d
}
