package audit

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"smsgw/otp"
)

// Reader is an otp.AuditReader on Postgres.
type Reader struct {
	pool *pgxpool.Pool
}

var _ otp.AuditReader = (*Reader)(nil)

// NewReader returns a Reader.
func NewReader(pool *pgxpool.Pool) *Reader { return &Reader{pool: pool} }

// Recent returns the newest rows, of one phone (served by the phone index) or
// of all, newest first.
func (r *Reader) Recent(ctx context.Context, phone string, limit int) ([]otp.AuditEvent, error) {
	const cols = `id::text, created_at, kind, outcome, request_id, coalesce(phone_e164, ''), client_ip,
		coalesce(reason, ''), coalesce(provider, ''), coalesce(provider_message_id, ''), coalesce(delivery_status, ''),
		coalesce(delivery_error_code, ''), coalesce(api_key, '')`
	var rows pgx.Rows
	var err error
	if phone != "" {
		rows, err = r.pool.Query(ctx, `SELECT `+cols+` FROM audit_log WHERE phone_e164 = $1
			ORDER BY created_at DESC, id DESC LIMIT $2`, phone, limit)
	} else {
		rows, err = r.pool.Query(ctx, `SELECT `+cols+` FROM audit_log ORDER BY created_at DESC, id DESC LIMIT $1`, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("audit: read: %w", err)
	}
	events, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (otp.AuditEvent, error) {
		var e otp.AuditEvent
		var ip *netip.Addr
		var at time.Time
		err := row.Scan(&e.ID, &at, &e.Kind, &e.Outcome, &e.RequestID, &e.Phone, &ip,
			&e.Reason, &e.Provider, &e.MessageID, &e.DeliveryStatus, &e.DeliveryErrorCode, &e.APIKey)
		e.Time = at.UTC()
		if ip != nil {
			e.ClientIP = *ip
		}
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("audit: read: %w", err)
	}
	return events, nil
}
