// Package apptest runs the real service for tests, built by the composition
// root (internal/app) from the shipped defaults: real Redis limiter and code
// store, the fake provider.
package apptest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/internal/app"
	"smsgw/internal/testenv"
	"smsgw/otp"
	"smsgw/pumping"
	"smsgw/sender"
	"smsgw/sender/fake"
)

// Secret is the SMSGW_SECRET of test services.
const Secret = "test-secret-0123456789abcdefghijklmnop"

// FailPrefix is refused by the fake provider of test services.
const FailPrefix = "+1201"

// Options change a test service. Zero values keep the defaults.
type Options struct {
	// Config changes the shipped defaults (config.toml). Before it runs, test
	// services differ from them in: the fake provider, a 10 s sender.timeout and a 10 s
	// redis.timeout (tests are about decisions, not deadlines: a loaded -race
	// run must not turn a slow call or a slow audit row into a 502 or 503), FailPrefix refused by the
	// fake provider, no refusal cache and the pumping rules off (each test
	// turns on what it tests), and listening on a free loopback port.
	Config func(*app.Config)
	// Pumping, when set, turns the pumping rules on with this configuration.
	Pumping   *pumping.Config
	Providers []sender.Named // default: the configured fake provider
	Redis     *redis.Client  // default: the test Redis under a fresh prefix
	Prefix    string         // with Redis: the key prefix (default "x:")
	Secret    string         // default: Secret
	// ChallengeSecret is SMSGW_CHALLENGE_SECRET, for [pumping.challenge].
	ChallengeSecret string
	// AuditLog takes the audit rows; default: discarded.
	AuditLog otp.AuditLog
	// Postgres, a database URL, puts the audit trail there as the service
	// does (writer, spool, reader, receipts); AuditLog is then unused.
	Postgres   string
	AdminToken string
	Log        *slog.Logger // default: discarded
}

// Service is a running test service and the parts a test looks into.
type Service struct {
	*otp.Service
	App    *app.App
	URL    string // http://host:port of its HTTP API
	Outbox *fake.Provider
	Guard  *pumping.Guard
	Redis  *redis.Client
	Prefix string
}

// discard is an audit log that keeps nothing.
type discard struct{}

func (discard) Record(context.Context, otp.AuditEvent) error { return nil }
func (discard) Finish(otp.AuditEvent)                        {}
func (discard) Note(otp.AuditEvent, string)                  {}
func (discard) Accepting() error                             { return nil }

// New builds and runs a service on the test Redis (skipped or failed, per
// testenv, when there is none); it stops when the test ends.
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
	cfg, err := app.LoadConfig("", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Redis.KeyPrefix = prefix
	cfg.Redis.Timeout.Duration = 10 * time.Second
	cfg.Sender.Timeout.Duration = 10 * time.Second
	cfg.Sender.Provider = "fake"
	cfg.Sender.Fake.FailPrefixes = []string{FailPrefix}
	cfg.Limits.LocalRefusalCache = 0
	cfg.Pumping.Mode = pumping.ModeOff
	cfg.Audit.SpoolDir = t.TempDir()
	if o.Pumping != nil {
		SetPumping(cfg, *o.Pumping)
	}
	if o.Config != nil {
		o.Config(cfg)
	}
	auditLog := o.AuditLog
	if auditLog == nil {
		auditLog = discard{}
	}
	if o.Postgres != "" {
		cfg.Postgres.URL, auditLog = o.Postgres, nil
	}
	a, err := app.New(context.Background(), cfg,
		app.Secrets{Code: secret, AdminToken: o.AdminToken, Challenge: o.ChallengeSecret},
		app.Deps{Redis: rdb, AuditLog: auditLog, Providers: o.Providers, Log: o.Log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("service: %v", err)
		}
		a.Close()
	})
	return Service{Service: a.Service, App: a, URL: "http://" + a.Addr(), Outbox: a.Outbox, Guard: a.Guard,
		Redis: rdb, Prefix: prefix}
}

// SetPumping writes p into cfg's [pumping] keys.
func SetPumping(cfg *app.Config, p pumping.Config) {
	c := &cfg.Pumping
	c.Mode, c.Window.Duration, c.Floors, c.Ratio, c.HourFactor = p.Mode, p.Window, p.Floors, p.Ratio, p.HourFactor
	c.Grace.Duration, c.HoldFor.Duration, c.RestrictFor.Duration, c.ReturningFor.Duration = p.Grace, p.HoldFor, p.RestrictFor, p.ReturningFor
	c.ChallengeBudget = p.ChallengeBudget
	c.Spend.Prices, c.Spend.DefaultPrice, c.Spend.Hour, c.Spend.Day = p.Spend.Prices, p.Spend.Default, p.Spend.Hour, p.Spend.Day
}
