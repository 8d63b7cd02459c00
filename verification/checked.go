package verification

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"smsgw/events"
	"smsgw/otp"
)

// Checked records a verify that changed the number's pending code on its
// pending verification (a number has at most one pending code). Verifies
// that arrive together share one transaction, as sends do.
func (s *Store) Checked(ctx context.Context, c otp.VerificationCheck) error {
	return s.checked.do(ctx, s, c)
}

// writeChecked writes cs in tx: one update and one batch of events per
// round of distinct numbers (two verifies of one number take two rounds,
// in order).
func (s *Store) writeChecked(ctx context.Context, tx pgx.Tx, cs []otp.VerificationCheck) error {
	return inRounds(cs, func(c otp.VerificationCheck) string { return c.Phone.E164 },
		func(round []otp.VerificationCheck) error { return s.writeCheckedRound(ctx, tx, round) })
}

func (s *Store) writeCheckedRound(ctx context.Context, tx pgx.Tx, cs []otp.VerificationCheck) error {
	phones, statuses, requestIDs := make([]string, len(cs)), make([]string, len(cs)), make([]string, len(cs))
	attempts, at := make([]int32, len(cs)), make([]time.Time, len(cs))
	for i, c := range cs {
		phones[i], statuses[i], requestIDs[i], attempts[i], at[i] = c.Phone.E164, c.Status, c.RequestID, int32(c.AttemptsLeft), c.At
	}
	// A number whose send was never recorded (Postgres was away) has no
	// pending verification: no row, nothing to tell.
	rows, err := tx.Query(ctx, `
		WITH t AS (
			SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::timestamptz[], $5::text[])
				AS t(phone, status, attempts, at, request_id)
		), target AS (
			SELECT t.*, (SELECT id FROM verifications WHERE phone_e164 = t.phone AND status = 'pending'
			             ORDER BY created_at DESC LIMIT 1) AS id
			FROM t
		)
		UPDATE verifications v SET status = target.status, attempts_left = target.attempts,
			updated_at = target.at, request_id = target.request_id
		FROM target WHERE v.id = target.id AND v.status = 'pending'
		RETURNING `+recordColumns("v"), phones, statuses, attempts, at, requestIDs)
	if err != nil {
		return fmt.Errorf("verifications: checked: %w", err)
	}
	changed, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (otp.Verification, error) { return scanRecord(r) })
	if err != nil {
		return fmt.Errorf("verifications: checked: %w", err)
	}
	var evs []events.Event
	for _, v := range changed {
		if v.Status == otp.VerificationPending {
			continue // a wrong guess with attempts left: no event
		}
		evs = append(evs, event("verification."+v.Status, v, v.RequestID, v.UpdatedAt))
	}
	return s.outbox.Add(ctx, tx, evs...)
}
