package ratelimit

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/internal/testenv"
)

// BenchmarkDecisionCPU is BenchmarkDecisions priced in CPU rather than in
// time: what a fresh decision costs this process and Redis, which the
// machine's other work changes less than it changes a rate. Each algorithm
// makes SMSGW_BENCH_DECISIONS fresh decisions (it runs only when that is
// set, e.g. to 20000) from the same callers, in interleaved rounds
// (SMSGW_BENCH_ROUNDS, default 5); it reports the medians of
//
//	<alg>-go-us      this process's CPU (user+sys) per decision
//	<alg>-redis-us   Redis's CPU (used_cpu_user+sys) per decision
//	<alg>-cmds       commands Redis ran per decision (INFO commandstats;
//	                 a script's inner commands counted, the script too)
//	x-<base>-cpu     the baseline's Go+Redis CPU per decision over smsgw's,
//	                 within a round
//
// Redis must be the test's own (SMSGW_TEST_REDIS_URL at a private
// redis-server): its CPU and command counts include every client's.
//
// Instructions, which the machine's load does not move, are counted with
// that redis-server run under valgrind --tool=callgrind: with
// SMSGW_BENCH_CALLGRIND set to its pid, each algorithm's decisions of a
// round are bracketed by callgrind_control -z and a dump named
// "<alg>-<round>" (callgrind_annotate's "Trigger:" line), whose total over
// SMSGW_BENCH_DECISIONS is the instructions a decision.
func BenchmarkDecisionCPU(b *testing.B) {
	procs := runtime.GOMAXPROCS(0)
	callers := max(1, (benchDecisionGoroutines+procs-1)/procs) * procs
	rdb, prefix := benchRedis(b, callers)
	algs := benchAlgorithms(rdb, prefix)
	rounds := testenv.BenchRounds(b, 5)
	s := os.Getenv("SMSGW_BENCH_DECISIONS")
	if s == "" {
		b.Skip("SMSGW_BENCH_DECISIONS unset: it needs a Redis of its own (SMSGW_TEST_REDIS_URL)")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		b.Fatalf("SMSGW_BENCH_DECISIONS=%q: want a positive number", s)
	}
	type cost struct{ goUS, redisUS, cmds float64 }
	costs := map[string][]cost{}
	ratios := map[string][]float64{}
	for b.Loop() {
		for r := range rounds {
			round := map[string]cost{}
			for k := range algs {
				alg := algs[(r+k)%len(algs)]
				runtime.GC()
				goBefore, redisBefore, cmdsBefore := processCPU(), redisCPU(b, rdb), redisCalls(b, rdb)
				callgrind(b, "-z")
				if err := decideCount(alg, callers, n); err != nil {
					b.Fatal(err)
				}
				callgrind(b, fmt.Sprintf("--dump=%s-%d", alg.name, r+1))
				goAfter, redisAfter, cmdsAfter := processCPU(), redisCPU(b, rdb), redisCalls(b, rdb)
				c := cost{
					goUS:    (goAfter - goBefore).Seconds() * 1e6 / float64(n),
					redisUS: (redisAfter - redisBefore) * 1e6 / float64(n),
					cmds:    (cmdsAfter - cmdsBefore - 1) / float64(n), // less the INFO itself
				}
				round[alg.name] = c
				costs[alg.name] = append(costs[alg.name], c)
			}
			for _, base := range []string{"seed", "redis_rate"} {
				o, t := round["smsgw"], round[base]
				ratios[base] = append(ratios[base], (t.goUS+t.redisUS)/(o.goUS+o.redisUS))
			}
		}
	}
	for _, alg := range algs {
		var g, r, c []float64
		for _, x := range costs[alg.name] {
			g, r, c = append(g, x.goUS), append(r, x.redisUS), append(c, x.cmds)
		}
		b.ReportMetric(testenv.Median(g), alg.name+"-go-us")
		b.ReportMetric(testenv.Median(r), alg.name+"-redis-us")
		b.ReportMetric(testenv.Median(c), alg.name+"-cmds")
		b.Logf("%s per round: go %.1f µs, redis %.1f µs", alg.name, g, r)
	}
	for _, base := range []string{"seed", "redis_rate"} {
		b.ReportMetric(testenv.Median(ratios[base]), "x-"+base+"-cpu")
		b.Logf("%s/smsgw CPU per round: %.2f (median %.2f)", base, ratios[base], testenv.Median(ratios[base]))
	}
	b.Logf("%d callers on GOMAXPROCS=%d, %d rounds of %d decisions per algorithm", callers, procs, rounds, n)
}

// decideCount makes n fresh decisions from callers goroutines.
func decideCount(alg benchAlgorithm, callers, n int) error {
	errs := make(chan error, callers)
	left := make(chan struct{}, n)
	for range n {
		left <- struct{}{}
	}
	close(left)
	ctx := context.Background()
	for range callers {
		go func() {
			for range left {
				allowed, err := alg.decide(ctx, benchPhone(), benchIP())
				if err == nil && !allowed {
					err = fmt.Errorf("%s refused a fresh phone from a fresh IP", alg.name)
				}
				if err != nil {
					errs <- err
					for range left {
					}
					return
				}
			}
			errs <- nil
		}()
	}
	var first error
	for range callers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// callgrind runs callgrind_control with arg on SMSGW_BENCH_CALLGRIND's
// pid, when it is set.
func callgrind(b *testing.B, arg string) {
	pid := os.Getenv("SMSGW_BENCH_CALLGRIND")
	if pid == "" {
		return
	}
	if out, err := exec.Command("callgrind_control", arg, pid).CombinedOutput(); err != nil {
		b.Fatalf("callgrind_control %s %s: %v: %s", arg, pid, err, out)
	}
}

// processCPU is this process's CPU time so far, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisCPU is Redis's CPU time so far in seconds, user and system.
func redisCPU(b *testing.B, rdb *redis.Client) float64 {
	var total float64
	for k, v := range infoFields(b, rdb, "cpu") {
		if k == "used_cpu_user" || k == "used_cpu_sys" {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return total
}

// redisCalls is how many commands Redis has run, scripts' inner ones
// included.
func redisCalls(b *testing.B, rdb *redis.Client) float64 {
	var total float64
	for k, v := range infoFields(b, rdb, "commandstats") {
		if !strings.HasPrefix(k, "cmdstat_") {
			continue
		}
		_, rest, _ := strings.Cut(v, "calls=")
		calls, _, _ := strings.Cut(rest, ",")
		f, _ := strconv.ParseFloat(calls, 64)
		total += f
	}
	return total
}

func infoFields(b testing.TB, rdb *redis.Client, section string) map[string]string {
	s, err := rdb.Info(context.Background(), section).Result()
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out[k] = v
		}
	}
	return out
}
