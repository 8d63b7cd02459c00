package verification

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"smsgw/events"
	"smsgw/otp"
)

// Sent records a send: a new verification, or one more text of a pending
// one (its delivery status starts again: it is the last text's). A receipt
// that arrived before the record is applied at once. Sends that arrive
// together share one transaction (groupQueue); each returns when its
// record is durable.
func (s *Store) Sent(ctx context.Context, in otp.VerificationSend) error {
	return s.sent.do(ctx, s, in)
}

// writeSent writes ins in tx: one upsert, one batch of events and one
// look-up of early receipts per round of distinct ids.
func (s *Store) writeSent(ctx context.Context, tx pgx.Tx, ins []otp.VerificationSend) error {
	return inRounds(ins, func(in otp.VerificationSend) string { return in.ID },
		func(round []otp.VerificationSend) error { return s.writeSentRound(ctx, tx, round) })
}

// sentColumns are the upsert's arrays, one element per send (sendArrays).
type sentColumns struct {
	ids, phones, countries, apiKeys, providers, messageIDs, requestIDs []string
	attempts                                                           []int32
	at, expires                                                        []time.Time
}

func sendArrays(ins []otp.VerificationSend) sentColumns {
	var c sentColumns
	for _, in := range ins {
		c.ids = append(c.ids, in.ID)
		c.phones = append(c.phones, in.Phone.E164)
		c.countries = append(c.countries, in.Phone.Country())
		c.apiKeys = append(c.apiKeys, in.APIKey)
		c.providers = append(c.providers, in.Receipt.Provider)
		c.messageIDs = append(c.messageIDs, in.Receipt.MessageID)
		c.requestIDs = append(c.requestIDs, in.RequestID)
		c.attempts = append(c.attempts, int32(in.AttemptsLeft))
		c.at = append(c.at, in.At)
		c.expires = append(c.expires, in.ExpiresAt)
	}
	return c
}

func (s *Store) writeSentRound(ctx context.Context, tx pgx.Tx, ins []otp.VerificationSend) error {
	c := sendArrays(ins)
	rows, err := tx.Query(ctx, `
		INSERT INTO verifications (id, phone_e164, country, api_key, status, sends, attempts_left, provider,
			provider_message_id, request_id, created_at, updated_at, expires_at)
		SELECT id, phone, country, api_key, 'pending', 1, attempts, provider, message_id, request_id, at, at, expires
		FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::int[], $6::text[], $7::text[], $8::text[],
			$9::timestamptz[], $10::timestamptz[])
			AS t(id, phone, country, api_key, attempts, provider, message_id, request_id, at, expires)
		ON CONFLICT (id) DO UPDATE SET sends = verifications.sends + 1, delivery_status = NULL,
			provider = excluded.provider, provider_message_id = excluded.provider_message_id,
			request_id = excluded.request_id, updated_at = excluded.updated_at, expires_at = excluded.expires_at
		RETURNING `+columns,
		c.ids, c.phones, c.countries, c.apiKeys, c.attempts, c.providers, c.messageIDs, c.requestIDs, c.at, c.expires)
	if err != nil {
		return fmt.Errorf("verifications: sent: %w", err)
	}
	recorded, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (otp.Verification, error) { return scanRecord(r) })
	if err != nil {
		return fmt.Errorf("verifications: sent: %w", err)
	}
	if len(recorded) != len(ins) {
		return fmt.Errorf("verifications: sent: %d of %d records written", len(recorded), len(ins))
	}
	if s.outbox.On() {
		byID := make(map[string]otp.Verification, len(recorded))
		for _, v := range recorded {
			byID[v.ID] = v
		}
		evs := make([]events.Event, len(ins))
		for i, in := range ins {
			evs[i] = event(events.VerificationSent, byID[in.ID], in.RequestID, in.At)
		}
		if err := s.outbox.Add(ctx, tx, evs...); err != nil {
			return err
		}
	}
	return s.earlyReceipts(ctx, tx, c)
}

// earlyReceipts applies the receipts that arrived before their texts'
// records (a fast provider, a slow commit), the best status of each.
func (s *Store) earlyReceipts(ctx context.Context, tx pgx.Tx, c sentColumns) error {
	var providers, messageIDs []string
	for i, id := range c.messageIDs {
		if id != "" {
			providers, messageIDs = append(providers, c.providers[i]), append(messageIDs, id)
		}
	}
	if len(messageIDs) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `
		SELECT DISTINCT ON (r.provider, r.message_id) r.provider, r.message_id, r.status
		FROM delivery_receipts r JOIN unnest($1::text[], $2::text[]) AS t(provider, message_id)
			ON r.provider = t.provider AND r.message_id = t.message_id
		ORDER BY r.provider, r.message_id, smsgw_delivery_rank(r.status) DESC`, providers, messageIDs)
	if err != nil {
		return fmt.Errorf("verifications: early receipts: %w", err)
	}
	type early struct{ provider, messageID, status string }
	found, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (early, error) {
		var e early
		err := r.Scan(&e.provider, &e.messageID, &e.status)
		return e, err
	})
	if err != nil {
		return fmt.Errorf("verifications: early receipts: %w", err)
	}
	for _, e := range found {
		if err := s.receipt(ctx, tx, e.provider, e.messageID, e.status); err != nil {
			return err
		}
	}
	return nil
}
