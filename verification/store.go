// Package verification keeps verification records in Postgres (SPEC
// "Verifications"): one row per code's life, written in one transaction
// with the events it causes (package events), before the answer that
// changed it. The code itself lives and dies in Redis (package codestore);
// the record outlives it, so a caller can ask what became of it.
package verification

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"smsgw/events"
	"smsgw/otp"
)

// Store is an otp.Verifications on Postgres.
type Store struct {
	pool   *pgxpool.Pool
	outbox *events.Outbox
	log    *slog.Logger
	queue  sentQueue
}

var _ otp.Verifications = (*Store)(nil)

// New returns a Store writing its events to outbox.
func New(pool *pgxpool.Pool, outbox *events.Outbox, log *slog.Logger) *Store {
	return &Store{pool: pool, outbox: outbox, log: log}
}

// columns are a record's, in the order scanRecord reads them.
const columns = `id::text, phone_e164, country, api_key, status, sends, attempts_left,
	coalesce(delivery_status, ''), request_id, created_at, updated_at, expires_at`

func scanRecord(row pgx.Row) (otp.Verification, error) {
	var v otp.Verification
	err := row.Scan(&v.ID, &v.Phone, &v.Country, &v.APIKey, &v.Status, &v.Sends, &v.AttemptsLeft,
		&v.DeliveryStatus, &v.RequestID, &v.CreatedAt, &v.UpdatedAt, &v.ExpiresAt)
	return v, err
}

// event is the verification.<status> event of v as it now is, caused by
// request requestID.
func event(typ string, v otp.Verification, requestID string, at time.Time) events.Event {
	var delivery *string
	if v.DeliveryStatus != "" {
		delivery = &v.DeliveryStatus
	}
	return events.New(typ, at, events.VerificationData{VerificationID: v.ID, Phone: v.Phone, Country: v.Country,
		Status: v.Status, DeliveryStatus: delivery, APIKey: v.APIKey, RequestID: requestID})
}

// inTx runs fn in a transaction bounded by a few seconds, also when the
// client has gone: the change it records has happened. fn must use the ctx
// it is given, not its caller's: a client that hangs up after its text was
// sent would otherwise cancel the record of that text.
func (s *Store) inTx(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return fn(ctx, tx) })
}

// Checked records a verify that changed the number's pending code on its
// pending verification (a number has at most one pending code).
func (s *Store) Checked(ctx context.Context, c otp.VerificationCheck) error {
	return s.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		v, err := scanRecord(tx.QueryRow(ctx, `
			UPDATE verifications SET status = $2, attempts_left = $3, updated_at = $4, request_id = $5
			WHERE id = (SELECT id FROM verifications WHERE phone_e164 = $1 AND status = 'pending'
			            ORDER BY created_at DESC LIMIT 1 FOR UPDATE)
			RETURNING `+columns, c.Phone.E164, c.Status, c.AttemptsLeft, c.At, c.RequestID))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // its send was never recorded (Postgres was away)
		}
		if err != nil {
			return fmt.Errorf("verifications: checked: %w", err)
		}
		if v.Status == otp.VerificationPending {
			return nil // a wrong guess with attempts left: no event
		}
		return s.outbox.Add(ctx, tx, event("verification."+v.Status, v, c.RequestID, c.At))
	})
}

// Get returns verification id.
func (s *Store) Get(ctx context.Context, id string) (otp.Verification, bool, error) {
	v, err := scanRecord(s.pool.QueryRow(ctx, `SELECT `+columns+` FROM verifications WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return v, false, nil
	}
	if err != nil {
		return v, false, fmt.Errorf("verifications: get: %w", err)
	}
	return v, true, nil
}

// End moves a pending verification to status, with its event.
func (s *Store) End(ctx context.Context, id, status, requestID string, at time.Time) (otp.Verification, bool, error) {
	var v otp.Verification
	changed := false
	err := s.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		v, err = scanRecord(tx.QueryRow(ctx, `UPDATE verifications SET status = $2, updated_at = $3, request_id = $4
			WHERE id = $1 AND status = 'pending' RETURNING `+columns, id, status, at, requestID))
		if errors.Is(err, pgx.ErrNoRows) {
			v, err = scanRecord(tx.QueryRow(ctx, `SELECT `+columns+` FROM verifications WHERE id = $1`, id))
			return err
		}
		if err != nil {
			return err
		}
		changed = true
		return s.outbox.Add(ctx, tx, event("verification."+status, v, requestID, at))
	})
	if err != nil {
		return v, false, fmt.Errorf("verifications: end: %w", err)
	}
	return v, changed, nil
}

// Recent lists a number's verifications, newest first (the console).
func (s *Store) Recent(ctx context.Context, phone string, limit int) ([]otp.Verification, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+columns+` FROM verifications WHERE phone_e164 = $1
		ORDER BY created_at DESC LIMIT $2`, phone, limit)
	if err != nil {
		return nil, fmt.Errorf("verifications: recent: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (otp.Verification, error) { return scanRecord(r) })
	if err != nil {
		return nil, fmt.Errorf("verifications: recent: %w", err)
	}
	return out, nil
}
