package events

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// Webhook is one [[events.webhooks]] entry with its secret read.
type Webhook struct {
	URL   string
	Key   []byte   // the HMAC key: the secret's base64 decoded
	Types []string // empty: every type
}

// Wants reports whether the webhook takes events of type t.
func (w Webhook) Wants(t string) bool { return len(w.Types) == 0 || slices.Contains(w.Types, t) }

// Options tune the outbox and its delivery loop; zero values take the
// defaults in parentheses.
type Options struct {
	Webhooks []Webhook
	// RetryFor is how long a delivery is retried before it is kept as
	// failed (24h); RetryBase the first wait after a failure (5s), doubled
	// each time up to RetryMax (1h).
	RetryFor  time.Duration
	RetryBase time.Duration
	RetryMax  time.Duration
	// Timeout bounds one delivery's HTTP request (10s).
	Timeout time.Duration
	// Poll is how often an idle loop looks for due deliveries (1s).
	Poll time.Duration
	// Retention is how long delivered events are kept (72h).
	Retention time.Duration
	// Batch is how many deliveries one claim takes (32); Parallel how many
	// are in flight at once per replica (8).
	Batch    int
	Parallel int
	Metrics  prometheus.Registerer
	// Client sends the deliveries; nil: one with Timeout and no redirects.
	Client *http.Client
}

func (o *Options) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.RetryFor, 24*time.Hour)
	def(&o.RetryBase, 5*time.Second)
	def(&o.RetryMax, time.Hour)
	def(&o.Timeout, 10*time.Second)
	def(&o.Poll, time.Second)
	def(&o.Retention, 72*time.Hour)
	if o.Batch <= 0 {
		o.Batch = 32
	}
	if o.Parallel <= 0 {
		o.Parallel = 8
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: o.Timeout,
			// A receiver answers where it was configured; a redirect would
			// carry the signed body elsewhere.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
}

// Outbox writes events next to the rows that caused them and delivers them.
type Outbox struct {
	pool *pgxpool.Pool
	o    Options
	keys map[string][]byte // webhook URL → HMAC key
	urls []string          // the webhooks' URLs, each once, in config order
	circ *circuits
	log  *slog.Logger
	m    *metrics
}

// NewOutbox returns an Outbox on pool. Without webhooks it writes nothing
// and its loop only waits.
func NewOutbox(pool *pgxpool.Pool, o Options, log *slog.Logger) *Outbox {
	o.defaults()
	x := &Outbox{pool: pool, o: o, keys: make(map[string][]byte, len(o.Webhooks)), log: log, m: newMetrics(o.Metrics)}
	for _, w := range o.Webhooks {
		if _, ok := x.keys[w.URL]; !ok {
			x.urls = append(x.urls, w.URL)
		}
		x.keys[w.URL] = w.Key
	}
	x.circ = newCircuits(x.urls, x.backoff, x.m)
	return x
}

// On reports whether any webhook is configured.
func (x *Outbox) On() bool { return len(x.o.Webhooks) > 0 }

// Add writes evs in tx, one row per event and webhook that wants its type,
// in one statement (a send's transaction may carry the events of many
// sends: one round trip for all of them): durable when tx commits, with the
// change it tells.
func (x *Outbox) Add(ctx context.Context, tx pgx.Tx, evs ...Event) error {
	if !x.On() {
		return nil
	}
	var ids, hooks, types, bodies []string
	var at, until []time.Time
	for _, ev := range evs {
		body, err := ev.Body()
		if err != nil {
			return fmt.Errorf("events: %s: %w", ev.Type, err)
		}
		for _, w := range x.o.Webhooks {
			if !w.Wants(ev.Type) {
				continue
			}
			ids, hooks, types, bodies = append(ids, ev.ID), append(hooks, w.URL), append(types, ev.Type), append(bodies, string(body))
			at, until = append(at, ev.Time), append(until, ev.Time.Add(x.o.RetryFor))
		}
	}
	if len(ids) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `
		INSERT INTO event_outbox (event_id, webhook, type, payload, created_at, next_attempt_at, retry_until)
		SELECT id, webhook, type, payload::jsonb, at, at, until
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::timestamptz[])
			AS t(id, webhook, type, payload, at, until)
		ON CONFLICT DO NOTHING`, ids, hooks, types, bodies, at, until)
	if err != nil {
		return fmt.Errorf("events: add %d deliveries: %w", len(ids), err)
	}
	for _, t := range types {
		x.m.written.WithLabelValues(t).Inc()
	}
	return nil
}

// AddNow writes evs in a transaction of their own (events that change no
// row of smsgw's, such as a pumping rule's).
func (x *Outbox) AddNow(ctx context.Context, evs ...Event) error {
	if !x.On() {
		return nil
	}
	return pgx.BeginFunc(ctx, x.pool, func(tx pgx.Tx) error { return x.Add(ctx, tx, evs...) })
}
