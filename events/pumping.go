package events

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"smsgw/otp"
)

// PumpingHolds lists what the pumping rules hold now (otp.PumpingAdmin's
// Holds; *pumping.Guard is one).
type PumpingHolds interface {
	Holds(ctx context.Context) (held, near []otp.PumpingHold, err error)
}

// WatchPumping tells pumping.restricted when a subject becomes held and
// pumping.lifted when it no longer is, looking every interval until ctx
// ends. The pumping rules decide in Redis scripts and let holds expire
// there; watching their operators' list keeps this package out of them.
func (x *Outbox) WatchPumping(ctx context.Context, holds PumpingHolds, every time.Duration) error {
	if !x.On() {
		<-ctx.Done()
		return nil
	}
	for {
		held, _, err := holds.Holds(ctx)
		if err == nil {
			err = x.SyncPumping(ctx, held, time.Now().UTC())
		}
		if err != nil && ctx.Err() == nil {
			x.log.WarnContext(ctx, "events: pumping holds not followed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

// SyncPumping brings pumping_states to held, with an event for each change,
// in one transaction. Replicas sync side by side: a change is told by the
// replica whose INSERT or DELETE took the row, once.
func (x *Outbox) SyncPumping(ctx context.Context, held []otp.PumpingHold, now time.Time) error {
	return pgx.BeginFunc(ctx, x.pool, func(tx pgx.Tx) error {
		rules, subjects := make([]string, len(held)), make([]string, len(held))
		var evs []Event
		for i, h := range held {
			rules[i], subjects[i] = h.Rule, h.Subject
			since, why := now, fmt.Sprintf("%g sends with no sign of a real user, over its budget of %g", h.Used, h.Limit)
			if r := h.Restricted; r != nil {
				since = r.Since.UTC()
				why = fmt.Sprintf("%g unverified texts over the %g its country earned", r.Unverified, r.Budget)
				if r.Abroad {
					why += " (only sends from networks known abroad)"
				}
			}
			var took bool
			err := tx.QueryRow(ctx, `INSERT INTO pumping_states (rule, subject, since, why) VALUES ($1, $2, $3, $4)
				ON CONFLICT DO NOTHING RETURNING true`, h.Rule, h.Subject, since, why).Scan(&took)
			if errors.Is(err, pgx.ErrNoRows) {
				continue
			}
			if err != nil {
				return fmt.Errorf("events: pumping state: %w", err)
			}
			evs = append(evs, New(PumpingRestricted, now, PumpingData{Rule: h.Rule, Subject: h.Subject, Since: since, Why: why}))
		}
		rows, err := tx.Query(ctx, `DELETE FROM pumping_states s
			WHERE NOT EXISTS (SELECT 1 FROM unnest($1::text[], $2::text[]) AS h(rule, subject)
			                  WHERE h.rule = s.rule AND h.subject = s.subject)
			RETURNING rule, subject, since, why`, rules, subjects)
		if err != nil {
			return fmt.Errorf("events: pumping lifted: %w", err)
		}
		lifted, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PumpingData, error) {
			var d PumpingData
			err := r.Scan(&d.Rule, &d.Subject, &d.Since, &d.Why)
			return d, err
		})
		if err != nil {
			return fmt.Errorf("events: pumping lifted: %w", err)
		}
		for _, d := range lifted {
			d.Why = "lifted: " + d.Why
			evs = append(evs, New(PumpingLifted, now, d))
		}
		return x.Add(ctx, tx, evs...)
	})
}
