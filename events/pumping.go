package events

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
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
// in one transaction of two statements. Replicas sync side by side: a
// change is told by the replica whose INSERT or DELETE took the row, once.
func (x *Outbox) SyncPumping(ctx context.Context, held []otp.PumpingHold, now time.Time) error {
	type key struct{ rule, subject string }
	var rules, subjects, whys []string
	var sinces []time.Time
	order := map[key]int{} // the hold's place in held: its event's
	for _, h := range held {
		k := key{h.Rule, h.Subject}
		if _, dup := order[k]; dup {
			continue
		}
		order[k] = len(rules)
		since, why := now, fmt.Sprintf("%g sends with no sign of a real user, over its budget of %g", h.Used, h.Limit)
		if r := h.Restricted; r != nil {
			since = r.Since.UTC()
			why = fmt.Sprintf("%g unverified texts over the %g its country earned", r.Unverified, r.Budget)
			if r.Abroad {
				why += " (only sends from networks known abroad)"
			}
		}
		rules, subjects, sinces, whys = append(rules, h.Rule), append(subjects, h.Subject), append(sinces, since), append(whys, why)
	}
	scan := func(r pgx.CollectableRow) (PumpingData, error) {
		var d PumpingData
		err := r.Scan(&d.Rule, &d.Subject, &d.Since, &d.Why)
		return d, err
	}
	return pgx.BeginFunc(ctx, x.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `INSERT INTO pumping_states (rule, subject, since, why)
			SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::text[])
			ON CONFLICT DO NOTHING
			RETURNING rule, subject, since, why`, rules, subjects, sinces, whys)
		if err != nil {
			return fmt.Errorf("events: pumping state: %w", err)
		}
		restricted, err := pgx.CollectRows(rows, scan)
		if err != nil {
			return fmt.Errorf("events: pumping state: %w", err)
		}
		slices.SortFunc(restricted, func(a, b PumpingData) int {
			return order[key{a.Rule, a.Subject}] - order[key{b.Rule, b.Subject}]
		})
		var evs []Event
		for _, d := range restricted {
			evs = append(evs, New(PumpingRestricted, now, PumpingData{Rule: d.Rule, Subject: d.Subject, Since: d.Since.UTC(), Why: d.Why}))
		}
		rows, err = tx.Query(ctx, `DELETE FROM pumping_states s
			WHERE NOT EXISTS (SELECT 1 FROM unnest($1::text[], $2::text[]) AS h(rule, subject)
			                  WHERE h.rule = s.rule AND h.subject = s.subject)
			RETURNING rule, subject, since, why`, rules, subjects)
		if err != nil {
			return fmt.Errorf("events: pumping lifted: %w", err)
		}
		lifted, err := pgx.CollectRows(rows, scan)
		if err != nil {
			return fmt.Errorf("events: pumping lifted: %w", err)
		}
		// In a stable order, which DELETE ... RETURNING does not promise.
		slices.SortFunc(lifted, func(a, b PumpingData) int {
			return cmp.Or(strings.Compare(a.Rule, b.Rule), strings.Compare(a.Subject, b.Subject))
		})
		for _, d := range lifted {
			d.Why = "lifted: " + d.Why
			evs = append(evs, New(PumpingLifted, now, d))
		}
		return x.Add(ctx, tx, evs...)
	})
}
