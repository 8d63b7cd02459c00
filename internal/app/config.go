package app

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/nyaruka/phonenumbers"

	"smsgw"
	"smsgw/api"
	"smsgw/challenge"
	"smsgw/internal/redisconn"
	"smsgw/otp"
	"smsgw/pumping"
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

	// Parsed forms, filled by validate.
	trustedProxies []netip.Prefix
	corsOrigins    []string
	messages       *otp.Messages
	prefixRules    []otp.PrefixRules
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

// redis is what the Redis client is built from.
func (c *Config) redis() redisconn.Options {
	return c.Redis.options(c.redisSentinelPassword)
}

func (r RedisConfig) options(sentinelPassword string) redisconn.Options {
	return redisconn.Options{URL: r.URL, SentinelMaster: r.SentinelMaster, SentinelAddrs: r.SentinelAddrs,
		SentinelPassword: sentinelPassword, ClusterAddrs: r.ClusterAddrs, Timeout: r.Timeout.Duration, PoolSize: r.PoolSize}
}

func (c *Config) pumping() pumping.Config {
	p := c.Pumping
	mode := p.Mode
	if mode == "" { // -dev makes it shadow before this (devConfig)
		mode = pumping.ModeEnforce
	}
	return pumping.Config{Mode: mode, Window: p.Window.Duration, Floors: p.Floors, Ratio: p.Ratio,
		HourFactor: p.HourFactor, Grace: p.Grace.Duration, HoldFor: p.HoldFor.Duration, ProbeEvery: p.ProbeEvery.Duration,
		RestrictFor: p.RestrictFor.Duration, ReturningFor: p.ReturningFor.Duration, ChallengeBudget: p.ChallengeBudget,
		Spend: pumping.Spend{Prices: p.Spend.Prices, Default: p.Spend.DefaultPrice, Hour: p.Spend.Hour, Day: p.Spend.Day}}
}

// challenge is [pumping.challenge] with its secret from the environment.
func (c *Config) challenge(secret string) challenge.Config {
	ch := c.Pumping.Challenge
	return challenge.Config{Provider: ch.Provider, SiteKey: ch.SiteKey, Secret: secret, VerifyURL: ch.VerifyURL,
		MinScore: ch.MinScore, Timeout: ch.Timeout.Duration}
}

func (c *Config) policy() otp.PhonePolicy {
	return otp.PhonePolicy{AllowedTypes: c.Phone.AllowedTypes, AllowedCountries: c.Phone.AllowedCountries, DeniedCountries: c.Phone.DeniedCountries}
}

func (c *Config) messageConfig() otp.MessageConfig {
	return otp.MessageConfig{Default: c.OTP.Message, Locales: c.OTP.Messages, App: c.OTP.AppName,
		TTL: c.OTP.TTL.Duration, WebOTPDomain: c.OTP.WebOTPDomain}
}

// APIKey is one [[api.keys]] entry.
type APIKey struct {
	Name    string `toml:"name"`
	SHA256  string `toml:"sha256"` // hex
	Enabled bool   `toml:"enabled"`
	// ForwardClientIP marks a backend that calls smsgw for its users: its
	// sends and verifies may carry "client_ip", the user's address.
	ForwardClientIP bool `toml:"forward_client_ip"`
}

// LimitRule is one [[limits.*]] entry. Digits is for [[limits.prefix]] only.
type LimitRule struct {
	Window Duration `toml:"window"`
	Max    int      `toml:"max"`
	Digits int      `toml:"digits"`
}

// Duration reads "500ms", "10m", "1h" and whole days like "90d" from TOML.
// A value that is not a duration is kept, not refused, so that the error can
// name its whole key ("limits.phone[0].window"), which the TOML decoder
// cannot: see badDuration.
type Duration struct {
	time.Duration
	bad string
}

func (d *Duration) UnmarshalText(b []byte) error {
	s := string(b)
	d.bad = ""
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 {
			d.bad = s
			return nil
		}
		d.Duration = time.Duration(n) * 24 * time.Hour
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		d.bad = s
		return nil
	}
	d.Duration = v
	return nil
}

var durationType = reflect.TypeFor[Duration]()

// badDuration finds a value that is not a duration anywhere in v and names
// its key, e.g. `limits.phone[0].window: not a duration like "10m", ...`.
func badDuration(v reflect.Value, key string) error {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == durationType {
			if bad := v.Interface().(Duration).bad; bad != "" {
				return fmt.Errorf("%s: not a duration like \"90s\", \"10m\", \"1h\" or \"90d\": %q", key, bad)
			}
			return nil
		}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if !f.IsExported() || name == "" {
				continue
			}
			sub := name
			if key != "" {
				sub = key + "." + name
			}
			if err := badDuration(v.Field(i), sub); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if err := badDuration(v.Index(i), fmt.Sprintf("%s[%d]", key, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			if err := badDuration(iter.Value(), fmt.Sprintf("%s.%v", key, iter.Key())); err != nil {
				return err
			}
		}
	}
	return nil
}

// keyError is an invalid value of a key the environment may set, so that
// the message can name the variable it came from.
type keyError struct {
	key string
	msg string
}

func (e *keyError) Error() string { return e.key + ": " + e.msg }

func knownProvider(name string) bool { return name == "fake" || name == "twilio" || name == "http" }

// providerNames is sender.providers, or sender.provider alone.
// providerNames are the providers the config names, in order; none when
// it names none (-dev then uses the fake one, serving refuses to start).
func (c *Config) providerNames() []string {
	if len(c.Sender.Providers) > 0 {
		return c.Sender.Providers
	}
	if c.Sender.Provider == "" {
		return nil
	}
	return []string{c.Sender.Provider}
}

func rules(in []LimitRule) []otp.Rule {
	out := make([]otp.Rule, len(in))
	for i, r := range in {
		out[i] = otp.Rule{Window: r.Window.Duration, Max: r.Max}
	}
	return out
}

// LoadConfig reads the embedded defaults, then the file at path (if any) over
// them, then the environment overrides, and validates the result.
func LoadConfig(path string, getenv func(string) string) (*Config, error) {
	var cfg Config
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
	}
	fromEnv := map[string]string{} // key → the variable that set it
	for _, o := range []struct {
		env, key string
		dst      *string
	}{
		{"SMSGW_LISTEN", "server.listen", &cfg.Server.Listen},
		{"SMSGW_REDIS_URL", "redis.url", &cfg.Redis.URL},
		{"SMSGW_DATABASE_URL", "postgres.url", &cfg.Postgres.URL},
	} {
		if v := getenv(o.env); v != "" {
			*o.dst = v
			fromEnv[o.key] = o.env
		}
	}
	cfg.redisSentinelPassword = getenv("SMSGW_REDIS_SENTINEL_PASSWORD")
	if err := badDuration(reflect.ValueOf(cfg), ""); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := cfg.validate(); err != nil {
		var ke *keyError
		if errors.As(err, &ke) && fromEnv[ke.key] != "" {
			return nil, fmt.Errorf("config: %s (set by %s): %s", ke.key, fromEnv[ke.key], ke.msg)
		}
		return nil, fmt.Errorf("config: %w", err)
	}
	return &cfg, nil
}

// validate checks every key a mistake in which would only show at runtime,
// and names the key.
func (c *Config) validate() error {
	if _, _, err := net.SplitHostPort(c.Server.Listen); err != nil {
		return &keyError{"server.listen", fmt.Sprintf("want host:port, got %q", c.Server.Listen)}
	}
	c.trustedProxies = c.trustedProxies[:0]
	for i, s := range c.Server.TrustedProxies {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return fmt.Errorf("server.trusted_proxies[%d]: %q is not a CIDR like \"10.0.0.0/8\"", i, s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		c.trustedProxies = append(c.trustedProxies, p.Masked())
	}
	origins, err := corsOrigins(c.Server.CORSOrigins)
	if err != nil {
		return err
	}
	c.corsOrigins = origins
	if c.Console.SessionTTL.Duration < time.Minute || c.Console.SessionTTL.Duration > 7*24*time.Hour {
		return fmt.Errorf("console.session_ttl: want 1m to 7d, got %s", c.Console.SessionTTL.Duration)
	}
	if c.Server.ShutdownTimeout.Duration <= 0 {
		return errors.New("server.shutdown_timeout: must be positive")
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("log.level: want debug, info, warn or error, got %q", c.Log.Level)
	}
	if err := c.redis().Validate(); err != nil {
		if msg, ok := strings.CutPrefix(err.Error(), "redis.url: "); ok {
			return &keyError{"redis.url", msg} // SMSGW_REDIS_URL may have set it
		}
		return err
	}
	if c.Redis.MinReplicasAcked < 0 {
		return fmt.Errorf("redis.min_replicas_acked: must not be negative, got %d", c.Redis.MinReplicasAcked)
	}
	if strings.ContainsAny(c.Redis.KeyPrefix, "{}") {
		return fmt.Errorf("redis.key_prefix: must not contain { or }: keys carry their own hash tags, got %q", c.Redis.KeyPrefix)
	}
	if c.Redis.Pipelines < 1 {
		return fmt.Errorf("redis.pipelines: must be at least 1, got %d", c.Redis.Pipelines)
	}
	if err := c.Region.validate(c.Redis); err != nil {
		return err
	}
	if u, err := url.Parse(c.Postgres.URL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return &keyError{"postgres.url", fmt.Sprintf("want postgres://user@host:port/db, got a %q URL", schemeOf(c.Postgres.URL))}
	}
	if c.Audit.QueueSize < 1 {
		return errors.New("audit.queue_size: must be at least 1")
	}
	if c.Audit.BatchSize < 1 {
		return errors.New("audit.batch_size: must be at least 1")
	}
	if c.Audit.SpoolDir == "" {
		return errors.New("audit.spool_dir: must be set: rows go there while Postgres is down")
	}
	if c.Audit.SpoolMaxBytes < 64<<10 {
		return fmt.Errorf("audit.spool_max_bytes: want at least 64 KiB, got %d", c.Audit.SpoolMaxBytes)
	}
	if c.Audit.WriteTimeout.Duration <= 0 {
		return errors.New("audit.write_timeout: must be positive")
	}
	if c.Audit.Retention.Duration < 0 {
		return errors.New("audit.retention: must not be negative (0 keeps every row)")
	}
	if c.Audit.PartitionsAhead < 1 || c.Audit.PartitionsAhead > 24 {
		return fmt.Errorf("audit.partitions_ahead: want 1 to 24 months, got %d", c.Audit.PartitionsAhead)
	}
	if c.Audit.RowsPerSubjectMinute < 1 {
		return fmt.Errorf("audit.rows_per_subject_minute: want at least 1, got %d", c.Audit.RowsPerSubjectMinute)
	}
	if c.Audit.RefusalRowsPerSecond < 1 {
		return fmt.Errorf("audit.refusal_rows_per_second: want at least 1, got %d", c.Audit.RefusalRowsPerSecond)
	}
	c.Phone.DefaultRegion = strings.ToUpper(c.Phone.DefaultRegion)
	if !phonenumbers.GetSupportedRegions()[c.Phone.DefaultRegion] {
		return fmt.Errorf("phone.default_region: %q is not a supported ISO 3166-1 alpha-2 region", c.Phone.DefaultRegion)
	}
	if c.OTP.Length < 4 || c.OTP.Length > 10 {
		return fmt.Errorf("otp.length: want 4 to 10 digits, got %d", c.OTP.Length)
	}
	if c.OTP.TTL.Duration < time.Second {
		return fmt.Errorf("otp.ttl: must be at least 1s, got %s", c.OTP.TTL.Duration)
	}
	if c.OTP.MaxAttempts < 1 {
		return fmt.Errorf("otp.max_attempts: must be at least 1, got %d", c.OTP.MaxAttempts)
	}
	if c.Limits.LocalRefusalCache < 0 {
		return errors.New("limits.local_refusal_cache: must not be negative")
	}
	if c.Limits.IPv6Prefix < 1 || c.Limits.IPv6Prefix > 128 {
		return fmt.Errorf("limits.ipv6_prefix: want 1 to 128, got %d", c.Limits.IPv6Prefix)
	}
	if err := otp.ValidateRules(rules(c.Limits.IP)); err != nil {
		return fmt.Errorf("limits.ip%w", err)
	}
	if err := otp.ValidateRules(rules(c.Limits.Phone)); err != nil {
		return fmt.Errorf("limits.phone%w", err)
	}
	if err := otp.ValidateRules(rules(c.Limits.VerifyIP)); err != nil {
		return fmt.Errorf("limits.verify_ip%w", err)
	}
	for key, list := range map[string][]LimitRule{"limits.ip": c.Limits.IP, "limits.phone": c.Limits.Phone,
		"limits.verify_ip": c.Limits.VerifyIP, "limits.country": c.Limits.Country, "limits.global": c.Limits.Global} {
		for i, r := range list {
			if r.Digits != 0 {
				return fmt.Errorf("%s[%d].digits: only [[limits.prefix]] windows have digits", key, i)
			}
		}
	}
	if err := otp.ValidateRules(rules(c.Limits.Country)); err != nil {
		return fmt.Errorf("limits.country%w", err)
	}
	if err := otp.ValidateRules(rules(c.Limits.Global)); err != nil {
		return fmt.Errorf("limits.global%w", err)
	}
	c.prefixRules = nil
	byDigits := map[int]int{} // digits → index in prefixRules
	for i, r := range c.Limits.Prefix {
		if r.Digits < 1 || r.Digits > 15 {
			return fmt.Errorf("limits.prefix[%d].digits: want 1 to 15 leading digits of the E.164 number, got %d", i, r.Digits)
		}
		j, ok := byDigits[r.Digits]
		if !ok {
			j = len(c.prefixRules)
			byDigits[r.Digits] = j
			c.prefixRules = append(c.prefixRules, otp.PrefixRules{Digits: r.Digits})
		}
		c.prefixRules[j].Rules = append(c.prefixRules[j].Rules, otp.Rule{Window: r.Window.Duration, Max: r.Max})
		if err := otp.ValidateRules(c.prefixRules[j].Rules); err != nil {
			return fmt.Errorf("limits.prefix[%d]: %w", i, err)
		}
	}
	if err := c.policy().Validate(); err != nil {
		return err
	}
	if err := c.pumping().Validate(); err != nil {
		return err
	}
	if err := otp.ValidateTestNumbers(c.TestNumbers, c.OTP.Length); err != nil {
		return err
	}
	c.apiKeys = nil
	names := map[string]bool{}
	for i, k := range c.API.Keys {
		if k.Name == "" || names[k.Name] {
			return fmt.Errorf("api.keys[%d].name: must be set and unique", i)
		}
		names[k.Name] = true
		sum, err := hex.DecodeString(k.SHA256)
		if err != nil || len(sum) != 32 {
			return fmt.Errorf("api.keys[%d].sha256: want the key's SHA-256 as 64 hex digits (printf %%s \"$KEY\" | sha256sum)", i)
		}
		c.apiKeys = append(c.apiKeys, api.APIKey{Name: k.Name, SHA256: [32]byte(sum), Enabled: k.Enabled,
			ForwardClientIP: k.ForwardClientIP})
	}
	m, err := otp.NewMessages(c.messageConfig(), c.OTP.Length)
	if err != nil {
		return err
	}
	c.messages = m
	if len(c.Sender.Providers) == 0 {
		if c.Sender.Provider != "" && !knownProvider(c.Sender.Provider) {
			return fmt.Errorf("sender.provider: want \"fake\", \"twilio\" or \"http\", got %q", c.Sender.Provider)
		}
	}
	seen := map[string]bool{}
	for i, p := range c.Sender.Providers {
		if !knownProvider(p) {
			return fmt.Errorf("sender.providers[%d]: want \"fake\", \"twilio\" or \"http\", got %q", i, p)
		}
		if seen[p] {
			return fmt.Errorf("sender.providers[%d]: %q is listed twice", i, p)
		}
		seen[p] = true
	}
	for country, names := range c.Sender.Routes {
		if len(country) != 2 || strings.ToUpper(country) != country {
			return fmt.Errorf("sender.routes.%s: not an upper-case ISO 3166-1 alpha-2 code", country)
		}
		for i, n := range names {
			if !slices.Contains(c.providerNames(), n) {
				return fmt.Errorf("sender.routes.%s[%d]: %q is not one of the configured providers %v", country, i, n, c.providerNames())
			}
		}
	}
	if c.Sender.Breaker.Failures < 1 {
		return errors.New("sender.breaker.failures: must be at least 1")
	}
	if c.Sender.Breaker.OpenFor.Duration <= 0 {
		return errors.New("sender.breaker.open_for: must be positive")
	}
	if u := c.Sender.Twilio.StatusCallbackURL; u != "" {
		if parsed, err := url.Parse(u); err != nil || (parsed.Scheme != "https" && parsed.Scheme != "http") || parsed.Host == "" {
			return fmt.Errorf("sender.twilio.status_callback_url: want the public https URL of /v1/webhooks/twilio/status, got %q", u)
		}
	}
	if c.Sender.Timeout.Duration <= 0 {
		return errors.New("sender.timeout: must be positive")
	}
	if c.Sender.Fake.OutboxSize < 1 {
		return errors.New("sender.fake.outbox_size: must be at least 1")
	}
	for i, p := range c.Sender.Fake.FailPrefixes {
		if !strings.HasPrefix(p, "+") {
			return fmt.Errorf("sender.fake.fail_prefixes[%d]: %q must be an E.164 prefix starting with +", i, p)
		}
	}
	return nil
}

// schemeOf shows only the scheme of a URL that may hold a password.
func schemeOf(raw string) string {
	if scheme, _, ok := strings.Cut(raw, "://"); ok {
		return scheme
	}
	return ""
}

// corsOrigins checks server.cors_origins: exact origins (scheme, host and
// port; no path), or "*" alone.
func corsOrigins(in []string) ([]string, error) {
	out := make([]string, 0, len(in))
	for i, o := range in {
		key := fmt.Sprintf("server.cors_origins[%d]", i)
		if o == "*" {
			if len(in) > 1 {
				return nil, fmt.Errorf("%s: \"*\" allows every origin; list it alone or not at all", key)
			}
			out = append(out, o)
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return nil, fmt.Errorf("%s: want an exact origin like \"https://signup.example.com\", got %q", key, o)
		}
		if strings.Contains(u.Host, "*") {
			return nil, fmt.Errorf("%s: wildcards inside an origin are not supported, got %q", key, o)
		}
		out = append(out, strings.ToLower(u.Scheme+"://"+u.Host))
	}
	return out, nil
}

// textPrice estimates what one text to a country costs, for the console's
// spend figures: the pumping spend ceiling's prices.
func (c *Config) textPrice(country string) float64 {
	if p, ok := c.Pumping.Spend.Prices[country]; ok {
		return p
	}
	return c.Pumping.Spend.DefaultPrice
}
