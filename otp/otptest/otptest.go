// Package otptest builds a real otp.Service for tests: real Redis limiter and
// code store, the fake provider, the SPEC's default limits.
package otptest

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/internal/redisbatch"
	"smsgw/internal/testenv"
	"smsgw/otp"
	"smsgw/otp/redisstore"
	"smsgw/pumping"
	"smsgw/ratelimit"
	"smsgw/sender"
	"smsgw/sender/fake"
)

// Secret is the SMSGW_SECRET of test services.
const Secret = "test-secret-0123456789abcdefghijklmnop"

// DefaultConfig is the SPEC's defaults.
func DefaultConfig() otp.Config {
	return otp.Config{
		DefaultRegion: "US",
		IPv6Prefix:    64,
		IPRules:       []otp.Rule{{Window: time.Minute, Max: 5}, {Window: 10 * time.Minute, Max: 30}, {Window: time.Hour, Max: 50}},
		PhoneRules:    []otp.Rule{{Window: time.Minute, Max: 1}, {Window: 10 * time.Minute, Max: 5}, {Window: time.Hour, Max: 10}},
		VerifyIPRules: []otp.Rule{{Window: time.Minute, Max: 20}, {Window: time.Hour, Max: 200}},
		CodeLength:    6,
		CodeTTL:       10 * time.Minute,
		MaxAttempts:   5,
		SendTimeout:   time.Second,
		Policy:        otp.PhonePolicy{AllowedTypes: []string{"mobile", "fixed_line_or_mobile"}},
	}
}

// DefaultMessage is the default text template of test services.
const DefaultMessage = "Your verification code is {{.Code}}. It expires in {{.TTLMinutes}} minutes."

// FailPrefix is refused by the fake provider of test services.
const FailPrefix = "+1201"

// Options change a test service. Zero values keep the defaults.
type Options struct {
	Config    func(*otp.Config)
	Messages  func(*otp.MessageConfig)
	Providers []sender.Named // default: the fake provider returned
	Redis     *redis.Client  // default: the test Redis under a fresh prefix
	Prefix    string         // with Redis: the key prefix (default "x:")
	Secret    string         // default: Secret
	// LocalRefusals sizes the limiter's refusal cache, kept in step over
	// pub/sub as in the service (0: no cache).
	LocalRefusals int
	// Pumping, when set, runs a pumping guard.
	Pumping *pumping.Config
	// Challenge, when set, asks for a bot challenge instead of a pumping
	// refusal.
	Challenge otp.ChallengeVerifier
}

// Service is a test service and the parts a test looks into.
type Service struct {
	*otp.Service
	Outbox *fake.Provider
	Redis  *redis.Client
	Prefix string
	// Guard is the pumping guard, when Options.Pumping asked for one.
	Guard *pumping.Guard
}

// New builds a service on the test Redis (skipped or failed, per testenv,
// when there is none).
func New(t testing.TB, o Options) Service {
	t.Helper()
	rdb, prefix := o.Redis, o.Prefix
	if rdb == nil {
		rdb, prefix = testenv.Redis(t)
	} else if prefix == "" {
		prefix = "x:"
	}
	secret := o.Secret
	if secret == "" {
		secret = Secret
	}
	cfg := DefaultConfig()
	if o.Config != nil {
		o.Config(&cfg)
	}
	mc := otp.MessageConfig{Default: DefaultMessage, TTL: cfg.CodeTTL}
	if o.Messages != nil {
		o.Messages(&mc)
	}
	msgs, err := otp.NewMessages(mc, cfg.CodeLength)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := otp.NewSecrets(secret)
	if err != nil {
		t.Fatal(err)
	}
	box := fake.New(10000, []string{FailPrefix}, nil)
	providers := o.Providers
	if providers == nil {
		providers = []sender.Named{{Name: "fake", Provider: box}}
	}
	router, err := sender.NewRouter(providers, sender.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Tests are about decisions, not Redis deadlines: a loaded machine
	// running -race must not turn a slow call into a 503.
	scripts := redisbatch.New(rdb, redisbatch.Options{Timeout: 10 * time.Second})
	limiter := ratelimit.New(rdb, prefix, ratelimit.Options{Scripts: scripts, LocalRefusals: o.LocalRefusals})
	if o.LocalRefusals > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { limiter.Run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	var guard *pumping.Guard
	if o.Pumping != nil {
		guard = pumping.New(rdb, prefix, *o.Pumping, pumping.Options{})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = guard.Run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	svc := otp.NewService(cfg, otp.Deps{
		Limiter:     limiter,
		Pumping:     pumpingDep(guard),
		Overrides:   overridesDep(guard),
		Challenge:   o.Challenge,
		Sender:      router,
		Codes:       redisstore.New(rdb, prefix, scripts),
		Idempotency: redisstore.NewIdempotency(rdb, prefix),
		Secrets:     keys,
		Messages:    msgs,
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	return Service{Service: svc, Outbox: box, Redis: rdb, Prefix: prefix, Guard: guard}
}

// pumpingDep keeps a nil *pumping.Guard from becoming a non-nil interface.
func pumpingDep(g *pumping.Guard) otp.PumpingGuard {
	if g == nil {
		return nil
	}
	return g
}

func overridesDep(g *pumping.Guard) otp.Overrides {
	if g == nil {
		return nil
	}
	return g
}
