package ratelimit

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/internal/redistopo"
	"smsgw/otp"
)

// BenchmarkTopologies measures smsgw's limiter on one primary (the shared
// Redis) and on a 3-master Redis Cluster of its own, in the same run:
//
//	decisions    fresh phone and IP every decision (decisions/s; on Cluster
//	             the two subjects are on different shards nearly always, so
//	             a decision reserves on two shards, then commits)
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
	rates := map[string]float64{}
	for _, lim := range limiters {
		alg := benchAlgorithm{lim.name, func(ctx context.Context, phone, ip string) (bool, error) {
			p, a := benchSubjects(phone, ip)
			d, err := lim.l.Allow(ctx, ticket(), []otp.Subject{p, a})
			return d.Allowed, err
		}}
		b.Run("decisions/"+lim.name, func(b *testing.B) {
			rate := decideFresh(b, alg, par)
			rates[lim.name] = rate
			b.ReportMetric(rate, "decisions/s")
			if lim.name != "single" && rates["single"] > 0 {
				b.ReportMetric(rate/rates["single"], "x-single")
			}
		})
		b.Run("hot/"+lim.name, func(b *testing.B) {
			before := lim.l.ContentionRefusals()
			_, refusals := hotRaces(b, alg)
			b.ReportMetric(float64(lim.l.ContentionRefusals()-before)/float64(max(refusals, 1)), "contention/refusal")
		})
	}
}
