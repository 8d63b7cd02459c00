package app

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"reflect"
	"strings"

	"github.com/BurntSushi/toml"

	"smsgw"
	"smsgw/api"
	"smsgw/otp"
)

// Config mirrors config.toml.
type Config struct {
	Server struct {
		Listen          string   `toml:"listen"`
		TrustedProxies  []string `toml:"trusted_proxies"`
		ShutdownTimeout Duration `toml:"shutdown_timeout"`
		CORSOrigins     []string `toml:"cors_origins"`
	} `toml:"server"`
	Console struct {
		SessionTTL Duration `toml:"session_ttl"`
	} `toml:"console"`
	Log struct {
		Level string `toml:"level"`
	} `toml:"log"`
	Redis    RedisConfig  `toml:"redis"`
	Region   RegionConfig `toml:"region"`
	Postgres struct {
		URL string `toml:"url"`
	} `toml:"postgres"`
	Audit struct {
		QueueSize       int      `toml:"queue_size"`
		BatchSize       int      `toml:"batch_size"`
		SpoolDir        string   `toml:"spool_dir"`
		SpoolMaxBytes   int64    `toml:"spool_max_bytes"`
		WriteTimeout    Duration `toml:"write_timeout"`
		Retention       Duration `toml:"retention"`
		PartitionsAhead int      `toml:"partitions_ahead"`
		// RowsPerSubjectMinute and RefusalRowsPerSecond bound the rows of
		// answers that texted nobody (SPEC "Audit").
		RowsPerSubjectMinute int `toml:"rows_per_subject_minute"`
		RefusalRowsPerSecond int `toml:"refusal_rows_per_second"`
	} `toml:"audit"`
	Phone struct {
		DefaultRegion    string   `toml:"default_region"`
		AllowedTypes     []string `toml:"allowed_types"`
		AllowedCountries []string `toml:"allowed_countries"`
		DeniedCountries  []string `toml:"denied_countries"`
	} `toml:"phone"`
	OTP struct {
		Length       int               `toml:"length"`
		TTL          Duration          `toml:"ttl"`
		MaxAttempts  int               `toml:"max_attempts"`
		AppName      string            `toml:"app_name"`
		Message      string            `toml:"message"`
		Messages     map[string]string `toml:"messages"`
		WebOTPDomain string            `toml:"webotp_domain"`
	} `toml:"otp"`
	Limits struct {
		IPv6Prefix        int         `toml:"ipv6_prefix"`
		LocalRefusalCache int         `toml:"local_refusal_cache"`
		IP                []LimitRule `toml:"ip"`
		Phone             []LimitRule `toml:"phone"`
		VerifyIP          []LimitRule `toml:"verify_ip"`
		Country           []LimitRule `toml:"country"`
		Prefix            []LimitRule `toml:"prefix"`
		Global            []LimitRule `toml:"global"`
		Key               []KeyLimit  `toml:"key"`
	} `toml:"limits"`
	Pumping struct {
		Mode       string   `toml:"mode"`
		Window     Duration `toml:"window"`
		Ratio      float64  `toml:"ratio"`
		HourFactor float64  `toml:"hour_factor"`
		Grace      Duration `toml:"grace"`
		HoldFor    Duration `toml:"hold_for"`
		ProbeEvery Duration `toml:"probe_every"`
		// RestrictFor and ReturningFor: see pumping.Config.
		RestrictFor     Duration       `toml:"restrict_for"`
		ReturningFor    Duration       `toml:"returning_for"`
		ChallengeBudget bool           `toml:"challenge_budget"`
		Floors          map[string]int `toml:"floors"`
		Spend           struct {
			DefaultPrice float64            `toml:"default_price"`
			Hour         float64            `toml:"hour"`
			Day          float64            `toml:"day"`
			Prices       map[string]float64 `toml:"prices"`
		} `toml:"spend"`
		Challenge struct {
			Provider  string   `toml:"provider"`
			SiteKey   string   `toml:"site_key"`
			VerifyURL string   `toml:"verify_url"`
			MinScore  float64  `toml:"min_score"`
			Timeout   Duration `toml:"timeout"`
		} `toml:"challenge"`
	} `toml:"pumping"`
	Events      EventsConfig     `toml:"events"`
	TestNumbers []otp.TestNumber `toml:"test_numbers"`
	API         struct {
		Keys []APIKey `toml:"keys"`
	} `toml:"api"`
	Sender struct {
		Provider  string              `toml:"provider"`
		Providers []string            `toml:"providers"`
		Timeout   Duration            `toml:"timeout"`
		Routes    map[string][]string `toml:"routes"`
		Breaker   struct {
			Failures int      `toml:"failures"`
			OpenFor  Duration `toml:"open_for"`
		} `toml:"breaker"`
		Fake struct {
			FailPrefixes []string `toml:"fail_prefixes"`
			OutboxSize   int      `toml:"outbox_size"`
		} `toml:"fake"`
		Twilio struct {
			From                string `toml:"from"`
			MessagingServiceSID string `toml:"messaging_service_sid"`
			APIBase             string `toml:"api_base"`
			StatusCallbackURL   string `toml:"status_callback_url"`
		} `toml:"twilio"`
		HTTP struct {
			URL string `toml:"url"`
		} `toml:"http"`
	} `toml:"sender"`

	// From the environment only (SMSGW_REDIS_SENTINEL_PASSWORD).
	redisSentinelPassword string
	// shadowedForFake: fakeShadow put the pumping rules in shadow mode.
	shadowedForFake bool

	// Parsed forms, filled by validate.
	trustedProxies []netip.Prefix
	corsOrigins    []string
	messages       *otp.Messages
	prefixRules    []otp.PrefixRules
	keyRules       []otp.KeyRules
	apiKeys        []api.APIKey
}

// RedisConfig is [redis], and each region's [region.redis.<name>].
type RedisConfig struct {
	URL              string   `toml:"url"`
	SentinelMaster   string   `toml:"sentinel_master"`
	SentinelAddrs    []string `toml:"sentinel_addrs"`
	ClusterAddrs     []string `toml:"cluster_addrs"`
	MinReplicasAcked int      `toml:"min_replicas_acked"`
	Timeout          Duration `toml:"timeout"`
	KeyPrefix        string   `toml:"key_prefix"`
	PoolSize         int      `toml:"pool_size"`
	Pipelines        int      `toml:"pipelines"`
}

// APIKey is one [[api.keys]] entry.
type APIKey struct {
	Name    string `toml:"name"`
	SHA256  string `toml:"sha256"` // hex
	Enabled bool   `toml:"enabled"`
	// ForwardClientIP marks a backend that calls smsgw for its users: its
	// sends and verifies may carry "client_ip", the user's address.
	ForwardClientIP bool `toml:"forward_client_ip"`
	// Publishable marks a browser's key: accepted only from Origins.
	Publishable bool     `toml:"publishable"`
	Origins     []string `toml:"origins"`
	// The key's texts (see keyText): its locale, app name (.App), WebOTP
	// domain and Android SMS Retriever hash, over otp's.
	Locale       string `toml:"locale"`
	AppName      string `toml:"app_name"`
	WebOTPDomain string `toml:"webotp_domain"`
	AppHash      string `toml:"app_hash"`
}

// KeyLimit is one [[limits.key]] entry: a window of a caller-defined key.
type KeyLimit struct {
	Name   string   `toml:"name"`
	Window Duration `toml:"window"`
	Max    int      `toml:"max"`
}

// LimitRule is one [[limits.*]] entry. Digits is for [[limits.prefix]] only.
type LimitRule struct {
	Window Duration `toml:"window"`
	Max    int      `toml:"max"`
	Digits int      `toml:"digits"`
}

// LoadConfig reads the embedded defaults, then the file at path (if any) over
// them, then the environment overrides, and validates the result.
func LoadConfig(path string, getenv func(string) string) (*Config, error) {
	var cfg Config
	inFile := func(...string) bool { return false } // whether the file sets a key
	if _, err := toml.Decode(smsgw.DefaultConfig, &cfg); err != nil {
		return nil, fmt.Errorf("built-in defaults: %w", err)
	}
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		// A file that lists windows replaces the default list, not adds to it.
		var probe struct {
			Limits struct {
				IP       []toml.Primitive `toml:"ip"`
				Phone    []toml.Primitive `toml:"phone"`
				VerifyIP []toml.Primitive `toml:"verify_ip"`
			} `toml:"limits"`
			Phone struct {
				AllowedTypes []string `toml:"allowed_types"`
			} `toml:"phone"`
		}
		if md, err := toml.Decode(string(b), &probe); err == nil {
			if md.IsDefined("phone", "allowed_types") {
				cfg.Phone.AllowedTypes = nil
			}
			for list, dst := range map[*[]toml.Primitive]*[]LimitRule{
				&probe.Limits.IP: &cfg.Limits.IP, &probe.Limits.Phone: &cfg.Limits.Phone, &probe.Limits.VerifyIP: &cfg.Limits.VerifyIP,
			} {
				if *list != nil {
					*dst = nil
				}
			}
		}
		md, err := toml.Decode(string(b), &cfg)
		if err != nil {
			var perr toml.ParseError
			if errors.As(err, &perr) {
				return nil, fmt.Errorf("config %s: %s", path, perr.ErrorWithPosition())
			}
			return nil, fmt.Errorf("config %s: %w", path, err)
		}
		if und := md.Undecoded(); len(und) > 0 {
			keys := make([]string, len(und))
			for i, k := range und {
				keys[i] = k.String()
			}
			return nil, fmt.Errorf("config %s: unknown key %s", path, strings.Join(keys, ", "))
		}
		inFile = md.IsDefined
	}
	fromEnv := map[string]string{} // key → the variable that set it
	for _, o := range []struct {
		env, key string
		dst      *string
	}{
		{"SMSGW_LISTEN", "server.listen", &cfg.Server.Listen},
		{"SMSGW_REDIS_URL", "redis.url", &cfg.Redis.URL},
		{"SMSGW_DATABASE_URL", "postgres.url", &cfg.Postgres.URL},
		{"SMSGW_REGION", "region.name", &cfg.Region.Name},
	} {
		if v := getenv(o.env); v != "" {
			*o.dst = v
			fromEnv[o.key] = o.env
		}
	}
	cfg.redisSentinelPassword = getenv("SMSGW_REDIS_SENTINEL_PASSWORD")
	cfg.readWebhookSecrets(getenv)
	if err := badDuration(reflect.ValueOf(cfg), ""); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	err := cfg.Region.ownRedis(&cfg.Redis, func(key string) bool { return inFile("redis", key) || fromEnv["redis."+key] != "" })
	if err == nil {
		err = cfg.validate()
	}
	if err != nil {
		var ke *keyError
		if errors.As(err, &ke) && fromEnv[ke.key] != "" {
			return nil, fmt.Errorf("config: %s (set by %s): %s", ke.key, fromEnv[ke.key], ke.msg)
		}
		return nil, fmt.Errorf("config: %w", err)
	}
	return &cfg, nil
}
