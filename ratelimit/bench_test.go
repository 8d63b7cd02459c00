package ratelimit

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/internal/testenv"
	"smsgw/otp"
)

// Benchmarks of smsgw's limiter against two baselines (baselines_test.go), all
// on the same real Redis in the same run, each under a key prefix of its own:
//
//	smsgw       Limiter.Allow: one script decides every window of both subjects
//	seed        the seed article's algorithm: one MULTI/EXEC per window
//	redis_rate  go-redis/redis_rate (GCRA): one script call per window
//
// Every decision is for a phone and a client IP, with the default rules
// (ipRules, phoneRules: 5/30/50 and 1/5/10 over 1m/10m/1h).

// benchDecisionGoroutines is about how many callers BenchmarkDecisions runs at
// once: enough to keep Redis busy on a 2-core machine, like a busy server's
// in-flight requests.
const benchDecisionGoroutines = 24

// benchAlgorithm decides one request for phone from ip.
type benchAlgorithm struct {
	name   string
	decide func(ctx context.Context, phone, ip string) (bool, error)
}

func benchSubjects(phone, ip string) (phoneSubject, ipSubject otp.Subject) {
	return otp.Subject{Scope: "phone", Key: "phone:" + phone, Rules: phoneRules},
		otp.Subject{Scope: "ip", Key: "ip:" + ip, Rules: ipRules}
}

// benchAlgorithms returns the three limiters, each under its own part of prefix so
// none sees another's keys: the baselines first, so smsgw's sub-benchmark can
// report its throughput relative to theirs.
func benchAlgorithms(rdb *redis.Client, prefix string) []benchAlgorithm {
	ours := New(rdb, prefix+"smsgw:", Options{})
	seed := &seedLimiter{rdb: rdb, prefix: prefix + "seed:"}
	rr := newRedisRateLimiter(rdb, prefix+"redis_rate:")
	return []benchAlgorithm{
		{"seed", func(ctx context.Context, phone, ip string) (bool, error) {
			p, a := benchSubjects(phone, ip)
			// The PHP checks the IP first, then the phone.
			return seed.Allow(ctx, phone, []otp.Subject{a, p})
		}},
		{"redis_rate", func(ctx context.Context, phone, ip string) (bool, error) {
			p, a := benchSubjects(phone, ip)
			return rr.Allow(ctx, []otp.Subject{p, a})
		}},
		{"smsgw", func(ctx context.Context, phone, ip string) (bool, error) {
			p, a := benchSubjects(phone, ip)
			d, err := ours.Allow(ctx, ticket(), []otp.Subject{p, a})
			return d.Allowed, err
		}},
	}
}

// benchIdentitySeq makes fresh phones and IPs. Keys live under a prefix new to
// every benchmark, so fresh within one process is fresh in Redis.
var benchIdentitySeq atomic.Uint64

func benchPhone() string {
	return "+1" + strconv.FormatUint(2_000_000_000+benchIdentitySeq.Add(1), 10)
}

func benchIP() string {
	n := benchIdentitySeq.Add(1)
	return netip.AddrFrom4([4]byte{10, byte(n >> 16), byte(n >> 8), byte(n)}).String()
}

// benchRedis returns a client with conns connections for the benchmark and a
// key prefix of its own. Every key under the prefix, redis_rate's included,
// is unlinked when b ends.
func benchRedis(b *testing.B, conns int) (*redis.Client, string) {
	b.Helper()
	// testenv checks Redis is there, hands out the prefix and deletes the keys
	// under it; redis_rate's own "rate:" keys are deleted here.
	_, prefix := testenv.Redis(b)
	opt, err := redis.ParseURL(testenv.RedisURL())
	if err != nil {
		b.Fatal(err)
	}
	opt.PoolSize = conns
	rdb := redis.NewClient(opt)
	b.Cleanup(func() {
		if err := testenv.UnlinkKeys(rdb, "rate:"+prefix+"*"); err != nil {
			b.Logf("unlink benchmark keys: %v", err)
		}
		rdb.Close()
	})
	return rdb, prefix
}

// BenchmarkDecisions measures how many decisions per second each algorithm
// makes for fresh identities (a new phone and a new IP every time, so every
// request is admitted and every window is checked), with about
// benchDecisionGoroutines concurrent callers. The machine is shared and
// drifts from minute to minute, so the algorithms take turns in rounds of
// benchDecisionRound each (SMSGW_BENCH_ROUNDS, default 5, each round
// starting with the next algorithm), and what is reported is the median
// over the rounds of each rate and of smsgw's rate over each baseline's in
// the same round (x-seed, x-redis_rate). Run it with -benchtime 1x.
func BenchmarkDecisions(b *testing.B) {
	procs := runtime.GOMAXPROCS(0)
	callers := max(1, (benchDecisionGoroutines+procs-1)/procs) * procs
	rdb, prefix := benchRedis(b, callers)
	algs := benchAlgorithms(rdb, prefix)
	rounds := testenv.BenchRounds(b, 5)
	rates := map[string][]float64{}
	ratios := map[string][]float64{}
	for b.Loop() {
		for r := range rounds {
			round := map[string]float64{}
			for k := range algs {
				alg := algs[(r+k)%len(algs)]
				rate, err := decideFresh(alg, callers, benchDecisionRound)
				if err != nil {
					b.Fatal(err)
				}
				round[alg.name] = rate
				rates[alg.name] = append(rates[alg.name], rate)
			}
			for _, base := range []string{"seed", "redis_rate"} {
				ratios[base] = append(ratios[base], round["smsgw"]/round[base])
			}
		}
	}
	for _, alg := range algs {
		b.ReportMetric(testenv.Median(rates[alg.name]), alg.name+"-decisions/s")
	}
	for _, base := range []string{"seed", "redis_rate"} {
		b.ReportMetric(testenv.Median(ratios[base]), "x-"+base)
		b.Logf("smsgw/%s per round: %.2f (median %.2f)", base, ratios[base], testenv.Median(ratios[base]))
	}
	b.Logf("%d callers on GOMAXPROCS=%d, %d rounds of %v per algorithm", callers, procs, rounds, benchDecisionRound)
}

// benchDecisionRound is how long one algorithm runs in one round of
// BenchmarkDecisions.
const benchDecisionRound = time.Second

// Hot-identity races: benchHotGoroutines goroutines decide benchHotPhoneRequests
// requests for benchHotPhones phones (each from a fresh IP) and benchHotIPRequests
// requests from one IP (each for a fresh phone), interleaved. A race takes far
// less than the shortest window (1m), so the right number of admissions is
// known: phoneRules[0].Max per hot phone, ipRules[0].Max for the hot IP.
const (
	benchHotGoroutines    = 50
	benchHotPhones        = 4
	benchHotPhoneRequests = 1000
	benchHotIPRequests    = 1000
)

// BenchmarkHotIdentities races each algorithm on a few hot identities, with
// fresh hot identities every iteration. One op is one race of
// benchHotPhoneRequests+benchHotIPRequests decisions; the metrics are per race:
//
//	admitted       requests admitted
//	over-admitted  admissions beyond each hot identity's limit, summed
//	under-admitted admissions short of each hot identity's limit, summed
//	correct        what an exact limiter admits: phoneRules[0].Max per hot
//	               phone plus ipRules[0].Max for the hot IP
func BenchmarkHotIdentities(b *testing.B) {
	rdb, prefix := benchRedis(b, benchHotGoroutines)
	for _, alg := range benchAlgorithms(rdb, prefix) {
		b.Run(alg.name, func(b *testing.B) { hotRaces(b, alg) })
	}
}

// decideFresh decides for a fresh phone and IP each time, from callers
// goroutines for d, and returns decisions per second.
func decideFresh(alg benchAlgorithm, callers int, d time.Duration) (float64, error) {
	ctx := context.Background()
	var n atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	began := time.Now()
	deadline := began.Add(d)
	for range callers {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				allowed, err := alg.decide(ctx, benchPhone(), benchIP())
				if err == nil && !allowed {
					err = fmt.Errorf("%s refused a fresh phone from a fresh IP", alg.name)
				}
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return float64(n.Load()) / time.Since(began).Seconds(), firstErr
}

// hotRaces runs races on fresh hot identities for as long as b wants and
// reports the per-race metrics; it returns the races and the refusals.
func hotRaces(b *testing.B, alg benchAlgorithm) (races, refusals int64) {
	wantPhone := min(phoneRules[0].Max, benchHotPhoneRequests/benchHotPhones)
	wantIP := min(ipRules[0].Max, benchHotIPRequests)
	correct := wantPhone*benchHotPhones + wantIP
	var admitted, over, under int64
	for b.Loop() {
		got, err := runHotRace(alg)
		if err != nil {
			b.Fatal(err)
		}
		races++
		for i, n := range got {
			want := int64(wantIP)
			if i < benchHotPhones {
				want = int64(wantPhone)
			}
			admitted += n
			over += max(n-want, 0)
			under += max(want-n, 0)
		}
	}
	b.ReportMetric(float64(admitted)/float64(races), "admitted")
	b.ReportMetric(float64(over)/float64(races), "over-admitted")
	b.ReportMetric(float64(under)/float64(races), "under-admitted")
	b.ReportMetric(float64(correct), "correct")
	return races, races*(benchHotPhoneRequests+benchHotIPRequests) - admitted
}

// runHotRace runs one race on fresh hot identities and returns the admissions per
// hot identity: benchHotPhones phones, then the IP.
func runHotRace(alg benchAlgorithm) ([benchHotPhones + 1]int64, error) {
	type request struct {
		phone, ip string
		hot       int // index of the request's hot identity
	}
	var phones [benchHotPhones]string
	for i := range phones {
		phones[i] = benchPhone()
	}
	hotIP := benchIP()
	reqs := make([]request, 0, benchHotPhoneRequests+benchHotIPRequests)
	for i := 0; i < max(benchHotPhoneRequests, benchHotIPRequests); i++ {
		if i < benchHotPhoneRequests {
			reqs = append(reqs, request{phones[i%benchHotPhones], benchIP(), i % benchHotPhones})
		}
		if i < benchHotIPRequests {
			reqs = append(reqs, request{benchPhone(), hotIP, benchHotPhones})
		}
	}

	var admitted [benchHotPhones + 1]atomic.Int64
	var next atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	ctx := context.Background()
	start := make(chan struct{})
	for range benchHotGoroutines {
		wg.Go(func() {
			<-start
			for {
				i := int(next.Add(1)) - 1
				if i >= len(reqs) {
					return
				}
				r := reqs[i]
				ok, err := alg.decide(ctx, r.phone, r.ip)
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				if ok {
					admitted[r.hot].Add(1)
				}
			}
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	var out [benchHotPhones + 1]int64
	if firstErr != nil {
		return out, firstErr
	}
	if el := time.Since(began); el > 30*time.Second {
		return out, fmt.Errorf("a race took %v: too close to the 1m window for the expected counts to hold", el)
	}
	for i := range admitted {
		out[i] = admitted[i].Load()
	}
	return out, nil
}
