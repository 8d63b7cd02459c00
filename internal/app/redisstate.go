package app

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"smsgw/admission"
	"smsgw/codestore"
	"smsgw/internal/redisbatch"
	"smsgw/otp"
	"smsgw/pumping"
	"smsgw/ratelimit"
	"smsgw/region"
)

// redisState is what a send keeps in Redis, wired for the topology: one
// primary (or Sentinel), a Cluster, or several regions.
type redisState struct {
	limits      otp.Limiter
	codes       region.CodeStore
	idempotency otp.IdempotencyStore
	guard       *pumping.Guard
	admitter    otp.SendAdmitter
}

func (a *App) redisState(cfg *Config, rdb redis.UniversalClient, log *slog.Logger, reg *prometheus.Registry) (redisState, error) {
	// Limiter, pumping guard and code store share pipelines: a send's
	// decisions and its code ride with other requests' in one round trip
	// each. With min_replicas_acked each pipeline ends in WAIT: an admission
	// (its pumping counts, its code) is held by that many replicas before
	// any text goes out.
	scripts := redisbatch.New(rdb, redisbatch.Options{Pipelines: cfg.Redis.Pipelines, Timeout: cfg.Redis.Timeout.Duration,
		MinReplicas: cfg.Redis.MinReplicasAcked})
	a.loops = append(a.loops, loop{"redis pipelines", scripts.Serve})
	limiter := ratelimit.New(rdb, cfg.Redis.KeyPrefix, ratelimit.Options{Scripts: scripts, LocalRefusals: cfg.Limits.LocalRefusalCache,
		ReservationLease: max(5*time.Second, 4*cfg.Redis.Timeout.Duration)})
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "smsgw_ratelimit_contention_refusals_total",
		Help: "Refusals owed only to other requests' pending reservations (Redis Cluster, subjects on several shards).",
	}, func() float64 { return float64(limiter.ContentionRefusals()) }))
	a.loops = append(a.loops, loop{"limiter refusal cache", limiter.Run})
	codeStore, idempotencyStore := codestore.New(rdb, cfg.Redis.KeyPrefix, scripts), codestore.NewIdempotency(rdb, cfg.Redis.KeyPrefix)
	var (
		limits      otp.Limiter          = limiter
		codes       region.CodeStore     = codeStore
		idempotency otp.IdempotencyStore = idempotencyStore
		homeScripts func(country string) pumping.Scripts
		dep         *region.Deployment
		homes       []homeParts
		fallback    fallbackStores
	)
	if cfg.Region.Name != "" {
		// Several regions: number-keyed state goes to the number's home.
		var err error
		dep, homes, fallback, err = a.regions(region.Store{Name: cfg.Region.Name, Redis: rdb, Scripts: scripts, Limiter: limiter,
			Codes: codes, Idempotency: idempotency}, cfg.Redis.KeyPrefix, reg)
		if err != nil {
			return redisState{}, err
		}
		limits, codes, idempotency = dep.Limiter(), dep.Codes(), dep.Idempotency()
		homeScripts = func(country string) pumping.Scripts { return dep.HomeScripts(country) }
	}
	// The guard always runs: with its rules off it still keeps the
	// operators' overrides and the spend ceiling.
	_, onCluster := rdb.(*redis.ClusterClient)
	guard := pumping.New(rdb, cfg.Redis.KeyPrefix, cfg.pumping(), pumping.Options{Log: log, Registerer: reg, Cluster: onCluster, Scripts: scripts,
		Home: homeScripts})
	a.Guard = guard
	// On one primary (or through Sentinel) a send's claim, windows, pumping
	// reservation and code are one script call; on Cluster its keys span
	// slots: one composed script per slot, the slots in parallel. Across
	// regions, a send to a number homed in another region is one script
	// call there (one per slot, at once, on a Cluster), with the other
	// homes' windows at the same time while its country moves; a home out
	// of reach gets the same call here, over the fallback stores; a keyed
	// send refused here claims there alone.
	var local region.LocalAdmitter = admission.New(scripts, limiter, guard, codeStore, idempotencyStore)
	if onCluster {
		local = admission.NewCluster(scripts, limiter, guard, codeStore, idempotencyStore, log)
	}
	var admitter otp.SendAdmitter = local
	if dep != nil {
		composed := func(h homeParts) region.HomeAdmitter {
			if h.cluster {
				return admission.NewCluster(h.scripts, h.limiter, guard, h.codes, h.idempotency, log)
			}
			return admission.New(h.scripts, h.limiter, guard, h.codes, h.idempotency)
		}
		byName := map[string]region.HomeAdmitter{}
		for _, h := range homes {
			byName[h.name] = composed(h)
		}
		here := composed(homeParts{name: cfg.Region.Name, scripts: scripts, limiter: limiter, codes: fallback.codes,
			idempotency: fallback.idempotency, cluster: onCluster})
		admitter = dep.Admitter(guard, local, byName, here)
	}
	a.loops = append(a.loops, loop{"pumping guard", guard.Run})
	return redisState{limits: limits, codes: codes, idempotency: idempotency, guard: guard, admitter: admitter}, nil
}
