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
	// sent and checked group the records of sends and of verifies.
	sent    groupQueue[otp.VerificationSend]
	checked groupQueue[otp.VerificationCheck]
}

var _ otp.Verifications = (*Store)(nil)

// New returns a Store writing its events to outbox.
func New(pool *pgxpool.Pool, outbox *events.Outbox, log *slog.Logger) *Store {
	s := &Store{pool: pool, outbox: outbox, log: log}
	s.sent.write, s.checked.write = s.writeSent, s.writeChecked
	return s
}

// columns are a record's, in the order scanRecord reads them.
var columns = recordColumns("")

// recordColumns are a record's columns qualified by table t ("" none), for
// a statement that joins another relation with columns of the same names.
func recordColumns(t string) string {
	if t != "" {
		t += "."
	}
	return fmt.Sprintf(`%[1]sid::text, %[1]sphone_e164, %[1]scountry, %[1]sapi_key, %[1]sstatus, %[1]ssends,
	%[1]sattempts_left, coalesce(%[1]sdelivery_status, ''), %[1]srequest_id, %[1]screated_at, %[1]supdated_at,
	%[1]sexpires_at`, t)
}

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
