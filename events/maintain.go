package events

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// maintain prunes delivered events past Retention, keeps as failed the
// rows that outlived retry_for unattempted, and refreshes the backlog
// gauges. Every replica may run it: all three are idempotent.
func (x *Outbox) maintain(ctx context.Context) {
	if _, err := x.Prune(ctx, time.Now()); err != nil && ctx.Err() == nil {
		x.log.WarnContext(ctx, "events: prune failed", "err", err)
	}
	if _, err := x.failUnattempted(ctx); err != nil && ctx.Err() == nil {
		x.log.WarnContext(ctx, "events: expired deliveries not kept as failed", "err", err)
	}
	if err := x.observeBacklog(ctx); err != nil && ctx.Err() == nil {
		x.log.WarnContext(ctx, "events: backlog not measured", "err", err)
	}
}

// Prune deletes delivered events older than Retention at now, and returns
// how many.
func (x *Outbox) Prune(ctx context.Context, now time.Time) (int64, error) {
	tag, err := x.pool.Exec(ctx, `DELETE FROM event_outbox WHERE state = 'delivered' AND delivered_at < $1`,
		now.Add(-x.o.Retention))
	if err != nil {
		return 0, fmt.Errorf("events: prune: %w", err)
	}
	return tag.RowsAffected(), nil
}

// failUnattempted keeps as failed the due rows past their retry_until that
// no attempt will fail: those of a webhook whose circuit is open here (its
// probes are its rows' attempts, each failed with the receiver down), and
// those of a webhook no replica is configured with any more (rows of a
// webhook only this replica lacks are delivered by the replicas that have
// it, before their retry_until). A row under a lease (being attempted) is
// not due, so it is left to its attempt. It returns how many it failed.
func (x *Outbox) failUnattempted(ctx context.Context) (int, error) {
	n := 0
	fail := func(q, msg string, args ...any) error {
		rows, err := x.pool.Query(ctx, `UPDATE event_outbox SET state = 'failed', last_error = $1
			WHERE state = 'pending' AND next_attempt_at <= now() AND retry_until <= now() AND `+q+`
			RETURNING type`, append([]any{msg}, args...)...)
		if err != nil {
			return err
		}
		types, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, t := range types {
			x.m.failed.WithLabelValues(t).Inc()
		}
		n += len(types)
		return nil
	}
	for u, lastErr := range x.circ.openNow() {
		msg := "not attempted for its last retries, the receiver failing: " + lastErr
		if err := fail("webhook = $2", msg, u); err != nil {
			return n, fmt.Errorf("events: expire: %w", err)
		}
	}
	if err := fail("webhook <> ALL($2::text[])", "webhook not configured", x.urls); err != nil {
		return n, fmt.Errorf("events: expire: %w", err)
	}
	return n, nil
}

// Backlog is what the outbox holds that is not delivered.
type Backlog struct {
	Pending       int
	Failed        int
	OldestPending time.Duration // 0 when none is pending
}

// Backlog counts the deliveries not made yet.
func (x *Outbox) Backlog(ctx context.Context) (Backlog, error) {
	var b Backlog
	var oldest float64
	err := x.pool.QueryRow(ctx, `SELECT
		count(*) FILTER (WHERE state = 'pending'),
		count(*) FILTER (WHERE state = 'failed'),
		coalesce(extract(epoch FROM now() - min(created_at) FILTER (WHERE state = 'pending')), 0)::float8
		FROM event_outbox WHERE state <> 'delivered'`).Scan(&b.Pending, &b.Failed, &oldest)
	if err != nil {
		return b, fmt.Errorf("events: backlog: %w", err)
	}
	b.OldestPending = time.Duration(oldest * float64(time.Second))
	return b, nil
}

func (x *Outbox) observeBacklog(ctx context.Context) error {
	b, err := x.Backlog(ctx)
	if err != nil {
		return err
	}
	x.m.pending.Set(float64(b.Pending))
	x.m.failedNow.Set(float64(b.Failed))
	x.m.oldest.Set(b.OldestPending.Seconds())
	return nil
}

// FailedDelivery is a delivery kept as failed, for the operators.
type FailedDelivery struct {
	Seq       int64
	EventID   string
	Type      string
	Webhook   string
	Attempts  int
	LastError string
	CreatedAt time.Time
}

// Failed lists the newest failed deliveries, at most limit.
func (x *Outbox) Failed(ctx context.Context, limit int) ([]FailedDelivery, error) {
	rows, err := x.pool.Query(ctx, `SELECT seq, event_id, type, webhook, attempts, last_error, created_at
		FROM event_outbox WHERE state = 'failed' ORDER BY created_at DESC LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("events: failed: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (FailedDelivery, error) {
		var f FailedDelivery
		err := r.Scan(&f.Seq, &f.EventID, &f.Type, &f.Webhook, &f.Attempts, &f.LastError, &f.CreatedAt)
		return f, err
	})
	if err != nil {
		return nil, fmt.Errorf("events: failed: %w", err)
	}
	return out, nil
}

// Retry puts a failed delivery back in the queue, due now and retried for
// another RetryFor; it reports whether there was such a failed delivery. An
// operator retries once the receiver is fixed: if this replica's circuit
// for the webhook is open, its next claim probes it at once.
func (x *Outbox) Retry(ctx context.Context, seq int64) (bool, error) {
	var webhook string
	err := x.pool.QueryRow(ctx, `UPDATE event_outbox SET state = 'pending', next_attempt_at = now(),
		retry_until = now() + make_interval(secs => $2::double precision / 1000)
		WHERE seq = $1 AND state = 'failed' RETURNING webhook`, seq, x.o.RetryFor.Milliseconds()).Scan(&webhook)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("events: retry: %w", err)
	}
	x.circ.probeNow(webhook)
	return true, nil
}
