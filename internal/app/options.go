package app

import (
	"smsgw/challenge"
	"smsgw/internal/redisconn"
	"smsgw/otp"
	"smsgw/pumping"
)

// The conversions of the configuration into each package's options, in one
// place: a newcomer changing a key finds here where it goes.

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

// domain is what the send and verify flows need of the configuration.
func (c *Config) domain() otp.Config {
	return otp.Config{
		DefaultRegion: c.Phone.DefaultRegion,
		IPv6Prefix:    c.Limits.IPv6Prefix,
		IPRules:       rules(c.Limits.IP),
		PhoneRules:    rules(c.Limits.Phone),
		VerifyIPRules: rules(c.Limits.VerifyIP),
		CountryRules:  rules(c.Limits.Country),
		PrefixRules:   c.prefixRules,
		GlobalRules:   rules(c.Limits.Global),
		KeyRules:      c.keyRules,
		Policy:        c.policy(),
		CodeLength:    c.OTP.Length,
		CodeTTL:       c.OTP.TTL.Duration,
		MaxAttempts:   c.OTP.MaxAttempts,
		SendTimeout:   c.Sender.Timeout.Duration,
		TestNumbers:   c.TestNumbers,
	}
}

func rules(in []LimitRule) []otp.Rule {
	out := make([]otp.Rule, len(in))
	for i, r := range in {
		out[i] = otp.Rule{Window: r.Window.Duration, Max: r.Max}
	}
	return out
}

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

// textPrice estimates what one text to a country costs, for the console's
// spend figures: the pumping spend ceiling's prices.
func (c *Config) textPrice(country string) float64 {
	if p, ok := c.Pumping.Spend.Prices[country]; ok {
		return p
	}
	return c.Pumping.Spend.DefaultPrice
}
