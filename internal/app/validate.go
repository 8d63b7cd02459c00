package app

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/nyaruka/phonenumbers"

	"smsgw/internal/redisconn"
	"smsgw/otp"
)

// keyError is an invalid value of a key the environment may set, so that
// the message can name the variable it came from.
type keyError struct {
	key string
	msg string
}

func (e *keyError) Error() string { return e.key + ": " + e.msg }

// redisKeyError names a key redisconn refused under section ("redis", or a
// region's "region.redis.<name>").
func redisKeyError(section string, err error) error {
	var ke *redisconn.KeyError
	if errors.As(err, &ke) {
		return &keyError{section + "." + ke.Key, ke.Msg}
	}
	return err
}

// ruleKeyError names the window otp.ValidateRules refused under key
// ("limits.ip[0].window").
func ruleKeyError(key string, err error) error {
	var re *otp.RuleError
	if errors.As(err, &re) {
		return &keyError{fmt.Sprintf("%s[%d].%s", key, re.Index, re.Field), re.Msg}
	}
	return err
}

func knownProvider(name string) bool { return name == "fake" || name == "twilio" || name == "http" }

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
	if err := c.Events.validate(); err != nil {
		return err
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("log.level: want debug, info, warn or error, got %q", c.Log.Level)
	}
	if err := c.redis().Validate(); err != nil {
		return redisKeyError("redis", err) // SMSGW_REDIS_URL may have set redis.url
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
		return ruleKeyError("limits.ip", err)
	}
	if err := otp.ValidateRules(rules(c.Limits.Phone)); err != nil {
		return ruleKeyError("limits.phone", err)
	}
	if err := otp.ValidateRules(rules(c.Limits.VerifyIP)); err != nil {
		return ruleKeyError("limits.verify_ip", err)
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
		return ruleKeyError("limits.country", err)
	}
	if err := otp.ValidateRules(rules(c.Limits.Global)); err != nil {
		return ruleKeyError("limits.global", err)
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
	if c.keyRules, err = keyRules(c.Limits.Key); err != nil {
		return err
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
	keys, err := apiKeys(c.API.Keys)
	if err != nil {
		return err
	}
	c.apiKeys = keys
	c.corsOrigins = browserOrigins(c.corsOrigins, keys)
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
