package audit

import (
	"context"
	"fmt"

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
	var rows pgx.Rows
	var err error
	if phone != "" {
		rows, err = r.pool.Query(ctx, `SELECT `+eventColumns+` FROM audit_log WHERE phone_e164 = $1
			ORDER BY created_at DESC, id DESC LIMIT $2`, phone, limit)
	} else {
		rows, err = r.pool.Query(ctx, `SELECT `+eventColumns+` FROM audit_log ORDER BY created_at DESC, id DESC LIMIT $1`, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("audit: read: %w", err)
	}
	events, err := pgx.CollectRows(rows, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("audit: read: %w", err)
	}
	return events, nil
}
