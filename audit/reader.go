package audit

import (
	"context"
	"encoding/json"

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
// of all, newest first: a Search by phone alone. Postgres gives each row as
// JSON named by its columns, which is the row's one JSON shape, so a new
// column needs nothing here.
func (r *Reader) Recent(ctx context.Context, phone string, limit int) ([]otp.AuditEvent, error) {
	return r.Search(ctx, otp.AuditQuery{Phone: phone, Limit: limit})
}

// scanEvent reads a row selected as to_json(a): the audit row's one JSON
// shape, the same as the spool's and the admin API's.
func scanEvent(row pgx.CollectableRow) (otp.AuditEvent, error) {
	var b []byte
	var e otp.AuditEvent
	if err := row.Scan(&b); err != nil {
		return e, err
	}
	err := json.Unmarshal(b, &e)
	e.Time = e.Time.UTC()
	return e, err
}
