package app

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/nyaruka/phonenumbers"
	"github.com/prometheus/client_golang/prometheus"

	"smsgw/internal/redisbatch"
	"smsgw/internal/redisconn"
	"smsgw/otp/redisstore"
	"smsgw/ratelimit"
	"smsgw/region"
)

// RegionConfig is [region]: this region's name, the home region of each
// destination country, and every other region's Redis (docs/regions.md).
type RegionConfig struct {
	Name         string                 `toml:"name"`
	HomesVersion int                    `toml:"homes_version"`
	DefaultHome  string                 `toml:"default_home"`
	Fallback     int                    `toml:"fallback"`
	Homes        map[string]string      `toml:"homes"`
	Redis        map[string]RedisConfig `toml:"redis"`
}

// regionName is what a region may be called: it appears in Redis keys.
var regionName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

// validate checks [region]; each other region's Redis takes the keys it
// leaves out from [redis].
func (r *RegionConfig) validate(local RedisConfig) error {
	if r.Name == "" {
		if len(r.Homes) > 0 || len(r.Redis) > 0 || r.DefaultHome != "" || r.Fallback != 0 {
			return &keyError{"region.name", "must be set when [region] lists homes, regions' Redis, default_home or fallback"}
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
			return &keyError{key, "this region's own Redis is [redis]"}
		}
		if !regionName.MatchString(name) {
			return &keyError{key, "want a region name of lowercase letters, digits and dashes"}
		}
		if rc.Timeout.Duration == 0 {
			rc.Timeout = local.Timeout
		}
		if rc.KeyPrefix == "" {
			rc.KeyPrefix = local.KeyPrefix
		}
		if rc.Pipelines == 0 {
			rc.Pipelines = local.Pipelines
		}
		if rc.URL == "" && len(rc.ClusterAddrs) == 0 && rc.SentinelMaster == "" {
			return &keyError{key + ".url", "must be set (or cluster_addrs, or sentinel_master with sentinel_addrs)"}
		}
		if err := rc.options("").Validate(); err != nil {
			return fmt.Errorf("%s.%s", key, strings.TrimPrefix(err.Error(), "redis."))
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
	homes := make(map[string]string, len(r.Homes))
	for country, home := range r.Homes {
		c := strings.ToUpper(country)
		if c != "001" && !phonenumbers.GetSupportedRegions()[c] {
			return &keyError{"region.homes." + country, "want an ISO 3166-1 alpha-2 code or \"001\""}
		}
		if !known(home) {
			return &keyError{"region.homes." + country, fmt.Sprintf("%q is neither this region nor one in [region.redis]", home)}
		}
		homes[c] = home
	}
	r.Homes = homes
	return nil
}

// regions builds the deployment over every region's Redis when [region]
// name is set: the local parts as built for one region, and the same parts
// over each other region's Redis, reached across regions.
func (a *App) regions(local region.Store, prefix string, reg prometheus.Registerer) (*region.Deployment, error) {
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
			return nil, fmt.Errorf("region.redis.%s: %w", name, err)
		}
		a.closers = append(a.closers, func() { rdb.Close() })
		scripts := redisbatch.New(rdb, redisbatch.Options{Pipelines: r.Pipelines, Timeout: r.Timeout.Duration, MinReplicas: r.MinReplicasAcked})
		limiter := ratelimit.New(rdb, r.KeyPrefix, ratelimit.Options{Scripts: scripts, LocalRefusals: cfg.Limits.LocalRefusalCache,
			ReservationLease: max(5*time.Second, 4*r.Timeout.Duration)})
		a.loops = append(a.loops, loop{"limiter refusal cache of region " + name, limiter.Run})
		remote = append(remote, region.Store{Name: name, Redis: rdb, Scripts: scripts, Limiter: limiter,
			Codes: redisstore.New(rdb, r.KeyPrefix, scripts), Idempotency: redisstore.NewIdempotency(rdb, r.KeyPrefix)})
	}
	dep := region.New(region.Options{
		Homes:    region.NewHomes(rc.HomesVersion, rc.DefaultHome, rc.Homes),
		Fallback: rc.Fallback,
		Local:    local,
		Remote:   remote,
		// The fallback's codes and scopes, apart from the local numbers'.
		FallbackCodes:       redisstore.New(local.Redis, prefix+"fb:", local.Scripts),
		FallbackIdempotency: redisstore.NewIdempotency(local.Redis, prefix+"fb:"),
		Prefix:              prefix,
		Log:                 a.log,
	})
	a.loops = append(a.loops, loop{"region fallback carry", dep.Run})
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "smsgw_region_fallback_admissions_total",
			Help: "Sends admitted from the local fallback ledger while their home region was out of reach."},
			func() float64 { return float64(dep.Fallbacks()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "smsgw_region_carried_total",
			Help: "Fallback admissions recorded in their home region's windows once it answered again."},
			func() float64 { return float64(dep.Carried()) }),
	)
	return dep, nil
}
