package ratelimit

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/internal/redistopo"
	"smsgw/internal/testenv"
	"smsgw/otp"
)

// BenchmarkTopologies measures smsgw's limiter on one primary (the shared
// Redis) and on a 3-master Redis Cluster of its own, in the same run:
//
//	decisions    fresh phone and IP every decision (decisions/s in interleaved
//	             rounds, medians; on Cluster the two subjects are on different
//	             shards nearly always, so a decision reserves on two shards,
//	             then commits)
//	hot          races on hot identities as in BenchmarkHotIdentities, with
//	             over- and under-admissions per race, and the share of
//	             refusals owed to other requests' pending reservations
//	             (contention/refusal; always 0 on one primary)
func BenchmarkTopologies(b *testing.B) {
	procs := runtime.GOMAXPROCS(0)
	par := max(1, (benchDecisionGoroutines+procs-1)/procs)
	single, prefix := benchRedis(b, max(par*procs, benchHotGoroutines))
	cluster := redistopo.StartCluster(b, 3)
	crdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), PoolSize: max(par*procs, benchHotGoroutines),
		ReadTimeout: 5 * time.Second, MaxRetries: -1})
	b.Cleanup(func() { crdb.Close() })
	limiters := []struct {
		name string
		l    *Limiter
	}{
		{"single", New(single, prefix+"smsgw:", Options{})},
		{"cluster", New(crdb, "bench:", Options{})},
	}
	algs := make([]benchAlgorithm, len(limiters))
	for i, lim := range limiters {
		algs[i] = benchAlgorithm{lim.name, func(ctx context.Context, phone, ip string) (bool, error) {
			p, a := benchSubjects(phone, ip)
			d, err := lim.l.Allow(ctx, ticket(), []otp.Subject{p, a})
			return d.Allowed, err
		}}
	}
	// Decisions take turns in rounds, as in BenchmarkDecisions: the medians
	// of each rate and of cluster's over single's within a round.
	b.Run("decisions", func(b *testing.B) {
		rounds := testenv.BenchRounds(b, 5)
		rates := map[string][]float64{}
		var ratios []float64
		for b.Loop() {
			for r := range rounds {
				round := map[string]float64{}
				for k := range algs {
					alg := algs[(r+k)%len(algs)]
					rate, err := decideFresh(alg, par*procs, benchDecisionRound)
					if err != nil {
						b.Fatal(err)
					}
					round[alg.name] = rate
					rates[alg.name] = append(rates[alg.name], rate)
				}
				ratios = append(ratios, round["cluster"]/round["single"])
			}
		}
		for _, alg := range algs {
			b.ReportMetric(testenv.Median(rates[alg.name]), alg.name+"-decisions/s")
		}
		b.ReportMetric(testenv.Median(ratios), "x-single")
		b.Logf("cluster/single per round: %.2f", ratios)
	})
	for i, lim := range limiters {
		b.Run("hot/"+lim.name, func(b *testing.B) {
			before := lim.l.ContentionRefusals()
			_, refusals := hotRaces(b, algs[i])
			b.ReportMetric(float64(lim.l.ContentionRefusals()-before)/float64(max(refusals, 1)), "contention/refusal")
		})
	}
}
