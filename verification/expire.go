package verification

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"smsgw/events"
	"smsgw/otp"
)

// ExpireDue marks expired, with verification.expired, up to 100 pending
// verifications whose expiry is before now, and returns how many. Replicas
// sweep side by side: each claims its own rows (FOR UPDATE SKIP LOCKED), so
// every expiry is told once.
func (s *Store) ExpireDue(ctx context.Context, now time.Time) (int, error) {
	n := 0
	err := s.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			UPDATE verifications v SET status = 'expired', updated_at = $1
			FROM (SELECT id FROM verifications WHERE status = 'pending' AND expires_at <= $1
			      ORDER BY expires_at LIMIT 100 FOR UPDATE SKIP LOCKED) due
			WHERE v.id = due.id
			RETURNING `+prefixed, now)
		if err != nil {
			return err
		}
		expired, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (otp.Verification, error) { return scanRecord(r) })
		if err != nil {
			return err
		}
		n = len(expired)
		evs := make([]events.Event, len(expired))
		for i, v := range expired {
			evs[i] = event(events.VerificationExpired, v, "", now)
		}
		return s.outbox.Add(ctx, tx, evs...)
	})
	if err != nil {
		return 0, fmt.Errorf("verifications: expire: %w", err)
	}
	return n, nil
}

// prefixed is columns as the sweeper's UPDATE … FROM names them.
const prefixed = `v.id::text, v.phone_e164, v.country, v.api_key, v.status, v.sends, v.attempts_left,
	coalesce(v.delivery_status, ''), v.request_id, v.created_at, v.updated_at, v.expires_at`

// Sweep expires due verifications every interval until ctx ends.
func (s *Store) Sweep(ctx context.Context, interval time.Duration) error {
	for {
		n, err := s.ExpireDue(ctx, time.Now().UTC())
		if err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "verifications: expiry sweep failed", "err", err)
		}
		if n == 100 {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}
