package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"smsgw/events"
	"smsgw/verification"
)

// EventsConfig is [events] (SPEC "Events (webhooks)").
type EventsConfig struct {
	// Retention: delivered events older than this are pruned.
	Retention Duration `toml:"retention"`
	// RetryFor: a delivery that never got a 2xx is kept as failed after
	// this; RetryBase, doubled per failure up to RetryMax, the waits.
	RetryFor  Duration `toml:"retry_for"`
	RetryBase Duration `toml:"retry_base"`
	RetryMax  Duration `toml:"retry_max"`
	// Timeout bounds one delivery; Poll is how often an idle replica looks
	// for due deliveries and expired verifications.
	Timeout  Duration        `toml:"timeout"`
	Poll     Duration        `toml:"poll"`
	Webhooks []WebhookConfig `toml:"webhooks"`
}

// WebhookConfig is one [[events.webhooks]] entry.
type WebhookConfig struct {
	URL       string   `toml:"url"`
	SecretEnv string   `toml:"secret_env"`
	Types     []string `toml:"types"`
	// Secret is the value of SecretEnv, read by LoadConfig (never from the
	// file).
	Secret string `toml:"-"`
	key    []byte
}

// readWebhookSecrets reads each webhook's secret from the environment
// variable it names.
func (c *Config) readWebhookSecrets(getenv func(string) string) {
	for i := range c.Events.Webhooks {
		if env := c.Events.Webhooks[i].SecretEnv; env != "" {
			c.Events.Webhooks[i].Secret = getenv(env)
		}
	}
}

// validate checks [events]: positive durations, absolute http(s) URLs,
// known types and a "whsec_<base64>" secret in each webhook's variable.
func (e *EventsConfig) validate() error {
	for key, d := range map[string]time.Duration{"events.retention": e.Retention.Duration, "events.retry_for": e.RetryFor.Duration,
		"events.retry_base": e.RetryBase.Duration, "events.retry_max": e.RetryMax.Duration,
		"events.timeout": e.Timeout.Duration, "events.poll": e.Poll.Duration} {
		if d <= 0 {
			return fmt.Errorf("%s: must be positive", key)
		}
	}
	for i := range e.Webhooks {
		w := &e.Webhooks[i]
		key := fmt.Sprintf("events.webhooks[%d]", i)
		u, err := url.Parse(w.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s.url: want an absolute http(s) URL, got %q", key, w.URL)
		}
		for _, t := range w.Types {
			if !events.KnownType(t) {
				return fmt.Errorf("%s.types: unknown event type %q (known: %v)", key, t, events.Types)
			}
		}
		if w.SecretEnv == "" {
			return fmt.Errorf("%s.secret_env: must name the environment variable holding the secret (\"whsec_<base64>\")", key)
		}
		if w.key, err = events.ParseSecret(w.Secret); err != nil {
			return fmt.Errorf("%s.secret_env: %s %s", key, w.SecretEnv, err)
		}
	}
	return nil
}

// options are the outbox's.
func (e *EventsConfig) options(reg prometheus.Registerer) events.Options {
	hooks := make([]events.Webhook, len(e.Webhooks))
	for i, w := range e.Webhooks {
		hooks[i] = events.Webhook{URL: w.URL, Key: w.key, Types: w.Types}
	}
	return events.Options{Webhooks: hooks, RetryFor: e.RetryFor.Duration, RetryBase: e.RetryBase.Duration,
		RetryMax: e.RetryMax.Duration, Timeout: e.Timeout.Duration, Poll: e.Poll.Duration,
		Retention: e.Retention.Duration, Metrics: reg}
}

// startEvents builds the verification records and the webhook outbox on
// pool, and adds their loops: deliveries, and the sweep that expires
// verifications nobody asked about.
func (a *App) startEvents(pool *pgxpool.Pool, reg prometheus.Registerer, log *slog.Logger) (*verification.Store, *events.Outbox) {
	outbox := events.NewOutbox(pool, a.cfg.Events.options(reg), log)
	store := verification.New(pool, outbox, log)
	poll := a.cfg.Events.Poll.Duration
	a.loops = append(a.loops, loop{"event deliveries", outbox.Run},
		loop{"verification expiry", func(ctx context.Context) error { return store.Sweep(ctx, poll) }})
	return store, outbox
}
