package events

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// claimDue takes due deliveries for this replica, at most $2[i] of webhook
// $1[i] each (a batch for a closed circuit, one row for a probe, see
// circuits): FOR UPDATE SKIP LOCKED lets replicas claim side by side
// without waiting on each other, and the lease in next_attempt_at ($3 ms)
// keeps the others off a claimed row until this replica has answered for
// it, or died (then another takes it once the lease is over: at least
// once). Each webhook's rows are read from event_outbox_due, led by the
// webhook, so a claim never walks another receiver's backlog; the update
// finds the claimed rows by their keys (a planner guess at the LIMITs
// would otherwise scan the table), and returns each row's next_attempt_at
// before the claim, so a row not attempted can be put back as it was.
const claimDue = `
	WITH due AS MATERIALIZED (
		SELECT d.seq, d.next_attempt_at AS was
		FROM unnest($1::text[], $2::int[]) AS w(url, n)
		CROSS JOIN LATERAL (SELECT seq, next_attempt_at FROM event_outbox
			WHERE state = 'pending' AND webhook = w.url AND next_attempt_at <= now()
			ORDER BY next_attempt_at LIMIT w.n
			FOR UPDATE SKIP LOCKED) d)
	UPDATE event_outbox o
	SET next_attempt_at = now() + make_interval(secs => $3::double precision / 1000), attempts = o.attempts + 1
	FROM due
	WHERE o.seq = ANY(ARRAY(SELECT seq FROM due)) AND o.seq = due.seq
	RETURNING o.seq, o.event_id, o.webhook, o.type, o.payload::text, o.attempts, o.retry_until, due.was`

// putBack undoes the claim of rows not attempted (their webhook's circuit
// opened while they waited for their turn): the attempt not counted, due
// when they were.
const putBack = `
	UPDATE event_outbox o SET attempts = o.attempts - 1, next_attempt_at = b.was
	FROM unnest($1::bigint[], $2::timestamptz[]) AS b(seq, was)
	WHERE o.seq = b.seq AND o.state = 'pending'`

// delivery is one claimed row.
type delivery struct {
	seq        int64
	id         string
	webhook    string
	typ        string
	body       string
	attempts   int
	retryUntil time.Time
	was        time.Time // next_attempt_at before the claim
	probe      bool      // claimed as its webhook's circuit's probe
}

// Run delivers due events until ctx ends: each claimed batch in parallel
// (at most Options.Parallel requests in flight, each bounded by Timeout),
// then the next batch at once, or after Poll when none was due. It also
// prunes delivered events past Retention, keeps as failed the rows that
// outlived retry_for unattempted, and keeps the backlog gauges. Its
// goroutines end before it returns.
func (x *Outbox) Run(ctx context.Context) error {
	if !x.On() {
		<-ctx.Done()
		return nil
	}
	var lastPrune time.Time
	for {
		n, err := x.DeliverDue(ctx)
		if err != nil && ctx.Err() == nil {
			x.log.WarnContext(ctx, "events: claiming deliveries failed", "err", err)
		}
		if time.Since(lastPrune) > time.Minute {
			lastPrune = time.Now()
			x.maintain(ctx)
		}
		if n >= x.o.Batch && err == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(x.o.Poll):
		}
	}
}

// DeliverDue claims one batch of due deliveries and makes them, and returns
// how many it claimed. A webhook whose circuit is open (see circuits) gives
// none, or its one probe.
func (x *Outbox) DeliverDue(ctx context.Context) (int, error) {
	closed, probes := x.circ.plan(x.urls)
	if len(closed)+len(probes) == 0 {
		return 0, nil
	}
	urls, limits := make([]string, 0, len(closed)+len(probes)), make([]int32, 0, len(closed)+len(probes))
	for _, u := range closed {
		urls, limits = append(urls, u), append(limits, int32(x.o.Batch))
	}
	probing := make(map[string]bool, len(probes))
	for _, u := range probes {
		urls, limits = append(urls, u), append(limits, 1)
		probing[u] = true
	}
	lease := 2*x.o.Timeout + 5*time.Second
	rows, err := x.pool.Query(ctx, claimDue, urls, limits, lease.Milliseconds())
	if err != nil {
		x.endProbes(probes, nil)
		return 0, fmt.Errorf("events: claim: %w", err)
	}
	batch, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (delivery, error) {
		var d delivery
		err := r.Scan(&d.seq, &d.id, &d.webhook, &d.typ, &d.body, &d.attempts, &d.retryUntil, &d.was)
		d.probe = probing[d.webhook]
		return d, err
	})
	if err != nil {
		x.endProbes(probes, nil)
		return 0, fmt.Errorf("events: claim: %w", err)
	}
	x.endProbes(probes, batch)
	sem := make(chan struct{}, x.o.Parallel)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var back []delivery
	for _, d := range batch {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if !d.probe && x.circ.open(d.webhook) {
				mu.Lock()
				back = append(back, d)
				mu.Unlock()
				return
			}
			x.deliver(ctx, d)
		})
	}
	wg.Wait()
	x.putBack(ctx, back)
	return len(batch), nil
}

// endProbes ends the probes that claimed no row.
func (x *Outbox) endProbes(probes []string, batch []delivery) {
	for _, u := range probes {
		if !slices.ContainsFunc(batch, func(d delivery) bool { return d.webhook == u }) {
			x.circ.probeDone(u)
		}
	}
}

// putBack returns rows claimed but not attempted to the queue as they were;
// one that cannot be put back goes again when its lease ends.
func (x *Outbox) putBack(ctx context.Context, back []delivery) {
	if len(back) == 0 {
		return
	}
	seqs, was := make([]int64, len(back)), make([]time.Time, len(back))
	for i, d := range back {
		seqs[i], was[i] = d.seq, d.was
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := x.pool.Exec(rctx, putBack, seqs, was); err != nil {
		x.log.WarnContext(ctx, "events: rows not attempted not put back: they go when their lease ends", "rows", len(back), "err", err)
	}
}

// deliver posts one event and records what came of it. A row whose outcome
// cannot be recorded stays claimed until its lease ends, then goes again.
func (x *Outbox) deliver(ctx context.Context, d delivery) {
	key, ok := x.keys[d.webhook]
	var err error
	if !ok {
		// Written for a webhook this replica's config no longer has.
		err = errors.New("webhook not configured on this replica")
	} else {
		err = x.post(ctx, d, key)
	}
	// Recorded even while shutting down: the text of the answer is known.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err == nil {
		x.m.delivered.WithLabelValues(d.typ).Inc()
		if x.circ.succeeded(d.webhook) {
			x.log.InfoContext(ctx, "events: the receiver answers again, its deliveries resume", "webhook", webhookLabel(d.webhook))
		}
		_, err = x.pool.Exec(rctx, `UPDATE event_outbox SET state = 'delivered', delivered_at = now(), last_error = ''
			WHERE seq = $1`, d.seq)
		if err != nil {
			x.log.WarnContext(ctx, "events: delivered, not recorded: it may go again", "event", d.id, "err", err)
		}
		return
	}
	x.m.attemptsFailed.WithLabelValues(d.typ).Inc()
	msg := err.Error()
	if len(msg) > 500 {
		msg = msg[:500]
	}
	if wait, opened := x.circ.failed(d.webhook, d.probe, msg); opened && ctx.Err() == nil {
		x.log.WarnContext(ctx, "events: delivery failed, the webhook's deliveries wait for a probe", "webhook", webhookLabel(d.webhook),
			"probe_in", wait.Round(time.Millisecond), "err", msg)
	}
	if !time.Now().Before(d.retryUntil) {
		x.m.failed.WithLabelValues(d.typ).Inc()
		x.log.WarnContext(ctx, "events: delivery failed for good", "event", d.id, "type", d.typ, "webhook", webhookLabel(d.webhook), "err", msg)
		_, err = x.pool.Exec(rctx, `UPDATE event_outbox SET state = 'failed', last_error = $2 WHERE seq = $1`, d.seq, msg)
	} else {
		wait := x.backoff(d.attempts)
		_, err = x.pool.Exec(rctx, `UPDATE event_outbox SET last_error = $2,
			next_attempt_at = now() + make_interval(secs => $3::double precision / 1000) WHERE seq = $1`,
			d.seq, msg, wait.Milliseconds())
	}
	if err != nil {
		x.log.WarnContext(ctx, "events: delivery outcome not recorded", "event", d.id, "err", err)
	}
}

// backoff is the wait after the attempt-th failure: RetryBase doubled each
// time up to RetryMax, less up to a fifth at random so retries of many
// events spread out.
func (x *Outbox) backoff(attempt int) time.Duration {
	d := x.o.RetryBase
	for i := 1; i < attempt && d < x.o.RetryMax; i++ {
		d *= 2
	}
	d = min(d, x.o.RetryMax)
	return d - time.Duration(rand.Int64N(int64(d)/5+1))
}

// post sends one delivery, signed; a 2xx answer delivers it.
func (x *Outbox) post(ctx context.Context, d delivery, key []byte) error {
	ctx, cancel := context.WithTimeout(ctx, x.o.Timeout)
	defer cancel()
	body := []byte(d.body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.webhook, bytes.NewReader(body))
	if err != nil {
		return err
	}
	now := time.Now()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "smsgw-webhooks")
	req.Header.Set("webhook-id", d.id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("webhook-signature", Sign(key, d.id, now, body))
	res, err := x.o.Client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return fmt.Errorf("receiver answered %d", res.StatusCode)
	}
	return nil
}
