package audit

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"smsgw/otp"
)

// Search returns the rows q selects, newest first. Every filter is a bound
// parameter; the phone and time indexes serve the common look-ups.
func (r *Reader) Search(ctx context.Context, q otp.AuditQuery) ([]otp.AuditEvent, error) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	if q.Phone != "" {
		add("phone_e164 = ?", q.Phone)
	}
	if q.IP.IsValid() {
		add("client_ip <<= ?", q.IP.Masked())
	}
	if q.RequestID != "" {
		add("request_id = ?", q.RequestID)
	}
	if q.Outcome != "" {
		add("outcome = ?", q.Outcome)
	}
	if q.Kind != "" {
		add("kind = ?", q.Kind)
	}
	if !q.From.IsZero() {
		add("created_at >= ?", q.From)
	}
	if !q.To.IsZero() {
		add("created_at < ?", q.To)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	sql := `SELECT to_json(a) FROM audit_log a`
	if len(where) > 0 {
		sql += ` WHERE ` + strings.Join(where, " AND ")
	}
	args = append(args, limit)
	sql += ` ORDER BY created_at DESC, id DESC LIMIT $` + strconv.Itoa(len(args))
	rows, err := r.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("audit: search: %w", err)
	}
	events, err := pgx.CollectRows(rows, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("audit: search: %w", err)
	}
	return events, nil
}

// Counts counts the requests (sum(count): a rollup stands for many) since a
// moment by kind, outcome, reason and destination country. Postgres groups by
// the first digits of the number (enough to tell calling codes and most
// ranges apart) and hands back one sample number per group, whose country is
// then looked up here.
func (r *Reader) Counts(ctx context.Context, since time.Time) ([]otp.AuditCount, error) {
	rows, err := r.pool.Query(ctx, `SELECT kind, outcome, coalesce(reason, ''), min(phone_e164), sum(count)
		FROM audit_log WHERE created_at >= $1
		GROUP BY kind, outcome, coalesce(reason, ''), substr(phone_e164, 1, 5)`, since)
	if err != nil {
		return nil, fmt.Errorf("audit: counts: %w", err)
	}
	type key struct{ kind, outcome, reason, country string }
	sum := map[key]int{}
	var order []key
	countries := map[string]string{}
	var kind, outcome, reason string
	var sample *string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&kind, &outcome, &reason, &sample, &n}, func() error {
		country := ""
		if sample != nil {
			c, ok := countries[*sample]
			if !ok {
				if p, err := otp.ParsePhone(*sample, ""); err == nil {
					c = p.Country()
				}
				countries[*sample] = c
			}
			country = c
		}
		k := key{kind, outcome, reason, country}
		if _, seen := sum[k]; !seen {
			order = append(order, k)
		}
		sum[k] += n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("audit: counts: %w", err)
	}
	out := make([]otp.AuditCount, len(order))
	for i, k := range order {
		out[i] = otp.AuditCount{Kind: k.kind, Outcome: k.outcome, Reason: k.reason, Country: k.country, Count: sum[k]}
	}
	return out, nil
}

// Buckets counts the requests (sum(count)) since a moment by kind and
// outcome in buckets of the given length (whole seconds, aligned to the Unix
// epoch), for charts. date_bin would do, but needs Postgres 14.
func (r *Reader) Buckets(ctx context.Context, since time.Time, bucket time.Duration) ([]otp.AuditBucket, error) {
	rows, err := r.pool.Query(ctx, `SELECT to_timestamp(floor(extract(epoch FROM created_at) / $2) * $2) AS b, kind, outcome, sum(count)
		FROM audit_log WHERE created_at >= $1 GROUP BY b, kind, outcome ORDER BY b`,
		since, bucket.Seconds())
	if err != nil {
		return nil, fmt.Errorf("audit: buckets: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (otp.AuditBucket, error) {
		var b otp.AuditBucket
		err := row.Scan(&b.Start, &b.Kind, &b.Outcome, &b.Count)
		b.Start = b.Start.UTC()
		return b, err
	})
	if err != nil {
		return nil, fmt.Errorf("audit: buckets: %w", err)
	}
	return out, nil
}
