package benchhttp

// BenchmarkRegions (make bench-regions) measures sends over several
// regions: three regions on this machine, each with its own Redis (one a
// Cluster), Postgres database and smsgw process, every cross-region
// connection through a proxy adding 70 ms each way (to the Cluster, one
// per node); next to them, in the same run, one single-region process as
// the baseline.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"smsgw/internal/redistopo"
	"smsgw/internal/testenv"
)

// oneWay is the proxies' delay each way.
const oneWay = 70 * time.Millisecond

// regionConfig is every process's: shipped defaults, loopback trusted as a proxy
// (X-Forwarded-For names a fresh client per request) and pumping in shadow
// mode (every request texts a fresh number nobody verifies, which enforce
// mode exists to refuse; shadow runs the same scripts in the same places).
const regionConfig = `[server]
listen = %q
trusted_proxies = ["127.0.0.0/8"]
[log]
level = "error"
[redis]
url = %q
key_prefix = "bench:"
%s
[postgres]
url = %q
[audit]
spool_dir = %q
[sender]
provider = "fake"
[pumping]
mode = "shadow"
%s
`

// BenchmarkRegions: for each scenario, sends a second and latency (p50,
// p99) over -concurrency clients, and cross-region requests per send (the
// proxies' count). Rounds interleave the scenarios; medians are reported.
func BenchmarkRegions(b *testing.B) {
	conc := envInt(b, "SMSGW_BENCH_CONCURRENCY", 32)
	dur := envDuration(b, "SMSGW_BENCH_DURATION", 8*time.Second)
	rounds := envInt(b, "SMSGW_BENCH_ROUNDS", 3)
	bin := filepath.Join(b.TempDir(), "smsgw")
	if out, err := exec.Command("go", "build", "-o", bin, "smsgw/cmd/smsgw").CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	redisA, redisB, cluster := redistopo.StartSingle(b), redistopo.StartSingle(b), redistopo.StartCluster(b, 3)
	link := func(to string) *testenv.Proxy { return testenv.NewDelayProxy(b, to, oneWay) }
	ab, ba, ca, cb := link(redisB.Addr), link(redisA.Addr), link(redisA.Addr), link(redisB.Addr)
	ac, bc := redistopo.NewClusterLink(b, cluster, oneWay), redistopo.NewClusterLink(b, cluster, oneWay)
	remote := func(name string, p *testenv.Proxy) string {
		// Other regions' timeout and pipelines: their defaults.
		return fmt.Sprintf("[region.redis.%s]\nurl = \"redis://%s/0\"\n", name, p.Addr())
	}
	remoteCluster := func(l *redistopo.ClusterLink) string {
		return "[region.redis.c]\ncluster_addrs = [\"" + strings.Join(l.Addrs(), `", "`) + "\"]\n"
	}
	homes := "[region]\nname = %q\ndefault_home = \"b\"\n[region.homes]\nGB = \"a\"\nFR = \"c\"\n"
	single, _ := startRegion(b, bin, "redis://"+redisA.Addr+"/0", "", "")
	a, aDSN := startRegion(b, bin, "redis://"+redisA.Addr+"/0", "", fmt.Sprintf(homes, "a")+remote("b", ab)+remoteCluster(ac))
	_, _ = startRegion(b, bin, "redis://"+redisB.Addr+"/0", "", fmt.Sprintf(homes, "b")+remote("a", ba)+remoteCluster(bc))
	c, _ := startRegion(b, bin, "redis://127.0.0.1:1/0", "cluster_addrs = [\""+strings.Join(cluster.Addrs(), `", "`)+"\"]",
		fmt.Sprintf(homes, "c")+remote("a", ca)+remote("b", cb))
	fromA := []counter{ab, ac}
	scenarios := []regionScenario{
		{"single region (baseline)", single, gb, nil},
		{"region a, number homed in a", a, gb, fromA},
		{"region c (Cluster), homed in c", c, fr, []counter{ca, cb}},
		{"region a, number homed in b", a, us, fromA},
		{"region a, homed in c (Cluster)", a, fr, fromA},
		{"region c (Cluster), homed in a", c, gb, []counter{ca, cb}},
		// Remote sends wait on latency: 8x the clients show the capacity.
		{"region a, homed in b, 8x clients", a, us, fromA},
	}
	// Warm up: connections to other regions take several round trips to
	// open, and scripts load on first use.
	for _, sc := range scenarios {
		runRegion(b, sc, conc, time.Second, rounds)
	}
	got := map[string][]regionResult{}
	for round := range rounds {
		// Each round starts one scenario later, so none always runs first.
		for i := range scenarios {
			sc := scenarios[(i+round)%len(scenarios)]
			n := conc
			if strings.HasSuffix(sc.name, "8x clients") {
				n = 8 * conc
			}
			r := runRegion(b, sc, n, dur, round)
			got[sc.name] = append(got[sc.name], r)
		}
	}
	b.Logf("%d rounds of %s each, %d clients, proxies adding %s each way; medians over rounds", rounds, dur, conc, oneWay)
	b.Logf("%-34s %10s %9s %9s %14s %8s", "scenario", "sends/s", "p50", "p99", "cross req/send", "non-202")
	base := medianOf(got[scenarios[0].name], func(r regionResult) float64 { return r.rate })
	for _, sc := range scenarios {
		rs := got[sc.name]
		rate := medianOf(rs, func(r regionResult) float64 { return r.rate })
		b.Logf("%-34s %10.0f %9s %9s %14.2f %8.0f   (%.2fx baseline)", sc.name, rate,
			time.Duration(medianOf(rs, func(r regionResult) float64 { return float64(r.p50) })).Round(100*time.Microsecond),
			time.Duration(medianOf(rs, func(r regionResult) float64 { return float64(r.p99) })).Round(100*time.Microsecond),
			medianOf(rs, func(r regionResult) float64 { return r.cross }), medianOf(rs, func(r regionResult) float64 { return float64(r.failed) }), rate/base)
	}
	rows, bytes := auditSize(b, aDSN)
	b.Logf("region a's audit_log: %d rows in %d bytes with indexes: %.0f bytes a row", rows, bytes, float64(bytes)/float64(rows))
}

// auditSize is a database's audit rows and the bytes their partitions and
// indexes take, the basis of the storage sizing in docs/regions.md.
func auditSize(b *testing.B, dsn string) (rows, bytes int64) {
	b.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE audit_log"); err != nil {
		b.Fatal(err)
	}
	err = conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM audit_log),
		(SELECT coalesce(sum(pg_total_relation_size(inhrelid)), 0) FROM pg_inherits WHERE inhparent = 'audit_log'::regclass)`).Scan(&rows, &bytes)
	if err != nil {
		b.Fatal(err)
	}
	return rows, bytes
}

type regionScenario struct {
	name  string
	url   string
	phone func(n int) string
	links []counter
}

// counter is a link between regions that counts what clients sent over it.
type counter interface{ Requests() int64 }

// gb, us and fr are fresh numbers homed in a, b and c.
func gb(n int) string { return fmt.Sprintf("+44740%07d", n%10_000_000) }
func us(n int) string { return fmt.Sprintf("+1415%03d%04d", 200+(n/10_000)%700, n%10_000) }
func fr(n int) string { return fmt.Sprintf("+3361%07d", n%10_000_000) }

type regionResult struct {
	rate     float64
	p50, p99 time.Duration
	cross    float64
	failed   int
}

var regionSeq atomic.Int64

func runRegion(b *testing.B, sc regionScenario, conc int, dur time.Duration, round int) regionResult {
	b.Helper()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: conc}}
	var crossBefore int64
	for _, p := range sc.links {
		crossBefore += p.Requests()
	}
	var (
		mu       sync.Mutex
		lat      []time.Duration
		failed   int
		lastFail string
		wg       sync.WaitGroup
	)
	end := time.Now().Add(dur)
	for range conc {
		wg.Go(func() {
			for time.Now().Before(end) {
				n := int(regionSeq.Add(1)) + round*1_000_000
				body := fmt.Sprintf(`{"phone": %q}`, sc.phone(n))
				req, _ := http.NewRequest(http.MethodPost, sc.url+"/v1/otp/send", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Forwarded-For", fmt.Sprintf("10.%d.%d.%d", n>>16&255, n>>8&255, n&255))
				t0 := time.Now()
				res, err := client.Do(req)
				d := time.Since(t0)
				ok := err == nil && res.StatusCode == 202
				why := fmt.Sprint(err)
				if err == nil {
					b, _ := io.ReadAll(res.Body)
					res.Body.Close()
					why = res.Status + " " + string(b)
				}
				mu.Lock()
				if ok {
					lat = append(lat, d)
				} else {
					failed++
					lastFail = why
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	var cross int64
	for _, p := range sc.links {
		cross += p.Requests()
	}
	if len(lat) == 0 {
		b.Fatalf("%s: no send was accepted (%d failed, the last: %s)", sc.name, failed, lastFail)
	}
	slices.Sort(lat)
	return regionResult{rate: float64(len(lat)) / dur.Seconds(), p50: lat[len(lat)/2], p99: lat[len(lat)*99/100],
		cross: float64(cross-crossBefore) / float64(len(lat)), failed: failed}
}

// startRegion runs the binary with its own database and waits until it is ready.
func startRegion(b *testing.B, bin, redisURL, redisExtra, regionTOML string) (url, dsn string) {
	b.Helper()
	dir := b.TempDir()
	addr := freeAddr(b)
	path := filepath.Join(dir, "smsgw.toml")
	dsn = testenv.MigratedDatabase(b)
	cfg := fmt.Sprintf(regionConfig, addr, redisURL, redisExtra, dsn, filepath.Join(dir, "spool"), regionTOML)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	return serve(b, bin, path, addr), dsn
}

func medianOf(rs []regionResult, f func(regionResult) float64) float64 {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = f(r)
	}
	return median(xs)
}
