package verification

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"smsgw/events"
	"smsgw/otp"
)

// deliveryStatus is a provider's status in the words of SPEC
// "Verifications": queued, sent, delivered, undelivered or failed.
func deliveryStatus(provider string) string {
	switch provider {
	case "sent", "delivered", "undelivered", "failed":
		return provider
	case "canceled":
		return "undelivered"
	case "read":
		return "delivered"
	}
	return "queued"
}

// receipt moves the verification whose last text is (provider, messageID)
// to the receipt's status, never back (a late "sent" leaves "delivered"),
// with verification.delivered or .undelivered when that is what it says.
func (s *Store) receipt(ctx context.Context, tx pgx.Tx, provider, messageID, status string) error {
	st := deliveryStatus(status)
	now := time.Now().UTC()
	v, err := scanRecord(tx.QueryRow(ctx, `
		UPDATE verifications SET delivery_status = $3, updated_at = $4
		WHERE provider_message_id = $2 AND provider = $1
		  AND smsgw_delivery_rank(coalesce(delivery_status, '')) < smsgw_delivery_rank($3)
		RETURNING `+columns, provider, messageID, st, now))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("verifications: receipt: %w", err)
	}
	switch st {
	case "delivered":
		return s.outbox.Add(ctx, tx, event(events.VerificationDelivered, v, "", now))
	case "undelivered", "failed":
		return s.outbox.Add(ctx, tx, event(events.VerificationUndelivered, v, "", now))
	}
	return nil
}

// Receipts is an otp.DeliveryLog that gives each receipt to the audit
// trail, then to the verification of its text.
type Receipts struct {
	Audit otp.DeliveryLog
	Store *Store
}

var _ otp.DeliveryLog = Receipts{}

// Report stores the receipt in the audit trail first (where it waits for a
// row not yet written), then moves the verification's delivery status.
func (r Receipts) Report(ctx context.Context, rep otp.DeliveryReport) error {
	if err := r.Audit.Report(ctx, rep); err != nil {
		return err
	}
	return r.Store.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		return r.Store.receipt(ctx, tx, rep.Provider, rep.MessageID, rep.Status)
	})
}
