package app

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/nyaruka/phonenumbers"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"smsgw/codestore"
	"smsgw/internal/redisbatch"
	"smsgw/internal/redisconn"
	"smsgw/ratelimit"
	"smsgw/region"
)

// RegionConfig is [region]: this region's name, the home region of each
// destination country, and every other region's Redis (docs/regions.md).
type RegionConfig struct {
	Name         string            `toml:"name"`
	HomesVersion int               `toml:"homes_version"`
	DefaultHome  string            `toml:"default_home"`
	Fallback     int               `toml:"fallback"`
	Homes        map[string]string `toml:"homes"`
	// PreviousHomes lists, while countries are being moved, each one's old
	// home: their windows are decided in both (docs/regions.md).
	PreviousHomes map[string]string      `toml:"previous_homes"`
	Redis         map[string]RedisConfig `toml:"redis"`
}

// Defaults of another region's Redis where [redis]'s would not do.
const (
	remoteTimeout   = 2 * time.Second
	remotePipelines = 16
)

// regionName is what a region may be called: it appears in Redis keys.
var regionName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

// validate checks [region]; each other region's Redis takes the keys it
// leaves out from [redis].
func (r *RegionConfig) validate(local RedisConfig) error {
	if r.Name == "" {
		if len(r.Homes) > 0 || len(r.PreviousHomes) > 0 || len(r.Redis) > 0 || r.DefaultHome != "" || r.Fallback != 0 {
			return &keyError{"region.name", "must be set (or SMSGW_REGION) when [region] lists homes, regions' Redis, default_home or fallback"}
		}
		return nil
	}
	if !regionName.MatchString(r.Name) {
		return &keyError{"region.name", fmt.Sprintf("want lowercase letters, digits and dashes, got %q", r.Name)}
	}
	if r.HomesVersion < 1 {
		return &keyError{"region.homes_version", fmt.Sprintf("must be at least 1, got %d", r.HomesVersion)}
	}
	if r.Fallback < 0 {
		return &keyError{"region.fallback", fmt.Sprintf("must not be negative, got %d", r.Fallback)}
	}
	known := func(name string) bool { _, ok := r.Redis[name]; return ok || name == r.Name }
	for name, rc := range r.Redis {
		key := "region.redis." + name
		if name == r.Name {
			// ownRedis moved it to [redis]; only Config.validate's
			// callers that skip LoadConfig get here.
			return &keyError{key, "this region's own Redis is [redis] (or this entry, through LoadConfig)"}
		}
		if !regionName.MatchString(name) {
			return &keyError{key, "want a region name of lowercase letters, digits and dashes"}
		}
		// A call to another region waits a cross-region round trip (and a
		// new connection's handshake, several); a pipeline in flight that
		// long holds every call behind it, so more fly at once.
		if rc.Timeout.Duration == 0 {
			rc.Timeout.Duration = max(local.Timeout.Duration, remoteTimeout)
		}
		if rc.Pipelines == 0 {
			rc.Pipelines = max(local.Pipelines, remotePipelines)
		}
		if rc.KeyPrefix == "" {
			rc.KeyPrefix = local.KeyPrefix
		}
		if rc.URL == "" {
			// url names no server of a Cluster or a Sentinel set; without
			// it their addresses are reached in plain text, database 0.
			seeds := append(rc.ClusterAddrs, rc.SentinelAddrs...)
			if len(seeds) == 0 {
				return &keyError{key + ".url", "must be set (or cluster_addrs, or sentinel_master with sentinel_addrs)"}
			}
			rc.URL = "redis://" + seeds[0] + "/0"
		}
		if err := rc.options("").Validate(); err != nil {
			return redisKeyError(key, err)
		}
		if strings.ContainsAny(rc.KeyPrefix, "{}") {
			return &keyError{key + ".key_prefix", "must not contain { or }"}
		}
		if rc.MinReplicasAcked < 0 {
			return &keyError{key + ".min_replicas_acked", "must not be negative"}
		}
		r.Redis[name] = rc
	}
	if r.DefaultHome == "" {
		r.DefaultHome = r.Name
	}
	if !known(r.DefaultHome) {
		return &keyError{"region.default_home", fmt.Sprintf("%q is neither this region nor one in [region.redis]", r.DefaultHome)}
	}
	var err error
	if r.Homes, err = countryTable("region.homes", r.Homes, known); err != nil {
		return err
	}
	if r.PreviousHomes, err = countryTable("region.previous_homes", r.PreviousHomes, known); err != nil {
		return err
	}
	return nil
}

// countryTable checks a country -> region table and keys it by upper-case
// country codes.
func countryTable(key string, table map[string]string, known func(string) bool) (map[string]string, error) {
	out := make(map[string]string, len(table))
	for country, home := range table {
		c := strings.ToUpper(country)
		if c != "001" && !phonenumbers.GetSupportedRegions()[c] {
			return nil, &keyError{key + "." + country, "want an ISO 3166-1 alpha-2 code or \"001\""}
		}
		if !known(home) {
			return nil, &keyError{key + "." + country, fmt.Sprintf("%q is neither this region nor one in [region.redis]", home)}
		}
		out[c] = home
	}
	return out, nil
}

// homeParts are another region's parts a composed send script needs
// (cluster: one script per slot there).
type homeParts struct {
	name        string
	scripts     *redisbatch.Batcher
	limiter     *ratelimit.Limiter
	codes       *codestore.Store
	idempotency *codestore.Idempotency
	cluster     bool
}

// fallbackStores keep, in the local Redis, the codes and idempotency
// scopes of sends admitted while their home was out of reach.
type fallbackStores struct {
	codes       *codestore.Store
	idempotency *codestore.Idempotency
}

// regions builds the deployment over every region's Redis when [region]
// name is set: the local parts as built for one region, the same parts
// over each other region's Redis, reached across regions, and the
// fallback's code and idempotency stores on the local Redis (fallback).
func (a *App) regions(local region.Store, prefix string, reg prometheus.Registerer) (dep *region.Deployment, homes []homeParts,
	fallback fallbackStores, err error) {
	cfg := a.cfg
	rc := cfg.Region
	var remote []region.Store
	names := make([]string, 0, len(rc.Redis))
	for name := range rc.Redis {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		r := rc.Redis[name]
		rdb, err := redisconn.New(r.options(""))
		if err != nil {
			return nil, nil, fallback, fmt.Errorf("region.redis.%s: %w", name, err)
		}
		a.onClose(func() { rdb.Close() })
		scripts := redisbatch.New(rdb, redisbatch.Options{Pipelines: r.Pipelines, Timeout: r.Timeout.Duration, MinReplicas: r.MinReplicasAcked})
		limiter := ratelimit.New(rdb, r.KeyPrefix, ratelimit.Options{Scripts: scripts, LocalRefusals: cfg.Limits.LocalRefusalCache,
			ReservationLease: max(5*time.Second, 4*r.Timeout.Duration)})
		a.loops = append(a.loops, loop{"redis pipelines of region " + name, scripts.Serve},
			loop{"limiter refusal cache of region " + name, limiter.Run})
		codes, idempotency := codestore.New(rdb, r.KeyPrefix, scripts), codestore.NewIdempotency(rdb, r.KeyPrefix)
		remote = append(remote, region.Store{Name: name, Redis: rdb, Scripts: scripts, Limiter: limiter,
			Codes: codes, Idempotency: idempotency})
		_, cluster := rdb.(*redis.ClusterClient)
		homes = append(homes, homeParts{name, scripts, limiter, codes, idempotency, cluster})
	}
	// The fallback's codes and scopes, apart from the local numbers'.
	fallback = fallbackStores{codes: codestore.New(local.Redis, prefix+"fb:", local.Scripts),
		idempotency: codestore.NewIdempotency(local.Redis, prefix+"fb:")}
	dep = region.New(region.Options{
		Homes:               region.NewHomes(rc.HomesVersion, rc.DefaultHome, rc.Homes, rc.PreviousHomes),
		Fallback:            rc.Fallback,
		Local:               local,
		Remote:              remote,
		FallbackCodes:       fallback.codes,
		FallbackIdempotency: fallback.idempotency,
		Prefix:              prefix,
		Log:                 a.log,
	})
	a.loops = append(a.loops, loop{"region fallback carry", dep.Run})
	a.log.Info("region", "name", rc.Name, "homes_version", rc.HomesVersion, "default_home", rc.DefaultHome,
		"fallback", rc.Fallback, "other_regions", names, "moving", len(rc.PreviousHomes))
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "smsgw_region_fallback_admissions_total",
			Help: "Sends admitted from the local fallback ledger while their home region was out of reach."},
			func() float64 { return float64(dep.Fallbacks()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "smsgw_region_homes_version",
			Help:        "[region] homes_version this process runs: during a move every region must show the new one before its next step.",
			ConstLabels: prometheus.Labels{"region": rc.Name}},
			func() float64 { return float64(rc.HomesVersion) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "smsgw_region_carried_total",
			Help: "Fallback admissions recorded in their home region's windows once it answered again."},
			func() float64 { return float64(dep.Carried()) }),
	)
	return dep, homes, fallback, nil
}
