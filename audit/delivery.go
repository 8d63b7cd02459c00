package audit

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"smsgw/otp"
)

// Deliveries is an otp.DeliveryLog on Postgres.
type Deliveries struct {
	pool *pgxpool.Pool
}

var _ otp.DeliveryLog = (*Deliveries)(nil)

// NewDeliveries returns a Deliveries.
func NewDeliveries(pool *pgxpool.Pool) *Deliveries { return &Deliveries{pool: pool} }

// storeReceipt keeps a receipt ($1 provider, $2 message id, $3 status, $4
// error code) in delivery_receipts, each status once.
const storeReceipt = `
		WITH receipt AS (
			INSERT INTO delivery_receipts (provider, message_id, status, error_code)
			VALUES ($1, $2, $3, NULLIF($4, ''))
			ON CONFLICT DO NOTHING
		)`

// report stores a receipt and moves its text's delivery status forward. The
// row is found through audit_message_ids (audit_log has no index on the
// message id: its final-outcome UPDATE could not be HOT with one); the
// UPDATE sets no indexed column either, so it is HOT when its page has room.
const report = storeReceipt + `
		UPDATE audit_log a
		SET delivery_status = $3, delivery_error_code = NULLIF($4, ''), delivery_updated_at = now()
		FROM audit_message_ids m
		WHERE m.message_id = $2 AND m.provider = $1 AND a.id = m.id AND a.created_at = m.created_at
		  AND smsgw_delivery_rank(coalesce(a.delivery_status, '')) <= smsgw_delivery_rank($3)`

// Report stores the receipt and moves the audit row's delivery status
// forward (never back: a late "sent" does not undo "delivered"). A receipt for
// a row not yet written waits in delivery_receipts; the writer applies it.
func (d *Deliveries) Report(ctx context.Context, r otp.DeliveryReport) error {
	_, err := d.pool.Exec(ctx, report, r.Provider, r.MessageID, r.Status, r.ErrorCode)
	if err != nil {
		return fmt.Errorf("audit: delivery report: %w", err)
	}
	return nil
}

// applyEarlyReceipts gives rows just written the receipts that arrived
// before them. Almost always there are none: one indexed look-up finds that
// out, and only the few message ids that have receipts are updated.
func applyEarlyReceipts(ctx context.Context, pool *pgxpool.Pool, events []otp.AuditEvent) error {
	var ids []string
	for _, e := range events {
		if e.MessageID != "" {
			ids = append(ids, e.MessageID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := pool.Query(ctx, `SELECT DISTINCT message_id FROM delivery_receipts WHERE message_id = ANY($1)`, ids)
	if err != nil {
		return fmt.Errorf("audit: early receipts: %w", err)
	}
	early, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("audit: early receipts: %w", err)
	}
	if len(early) == 0 {
		return nil
	}
	_, err = pool.Exec(ctx, `
		UPDATE audit_log a
		SET delivery_status = r.status, delivery_error_code = r.error_code, delivery_updated_at = r.received_at
		FROM (
			SELECT DISTINCT ON (provider, message_id) provider, message_id, status, error_code, received_at
			FROM delivery_receipts
			WHERE message_id = ANY($1)
			ORDER BY provider, message_id, smsgw_delivery_rank(status) DESC, received_at DESC
		) r, audit_message_ids m
		WHERE m.message_id = ANY($1) AND m.provider = r.provider AND m.message_id = r.message_id
		  AND a.id = m.id AND a.created_at = m.created_at AND a.delivery_status IS NULL`, early)
	if err != nil {
		return fmt.Errorf("audit: apply early receipts: %w", err)
	}
	return nil
}
