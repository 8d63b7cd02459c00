package audit

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"smsgw/otp"
)

// columns are the audit_log columns the service writes, in the order arrays
// encodes them and fromArrays names them. Adding a column is a migration, a
// field of otp.AuditEvent, and an entry here, in arrays and in fromArrays'
// parameter types.
var columns = []string{"id", "created_at", "kind", "outcome", "request_id", "phone_e164", "client_ip", "reason",
	"provider", "provider_message_id", "api_key", "count", "last_at", "subject", "segments"}

// arrays encodes rows for fromArrays: one array per column, in the order of
// columns, NULL for an empty value. Its elements point into events (which
// must not change until the statement has run), so a row costs no
// allocation of its own, and pgx boxes a pointer where it would copy a
// string or a time to the heap.
func arrays(events []otp.AuditEvent) []any {
	n := len(events)
	ids, kinds, outcomes, requests := make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
	times := make([]*time.Time, n)
	ips := make([]*netip.Addr, n)
	phones, reasons, providers, messages, keys := make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
	counts, lasts, subjects := make([]int32, n), make([]*time.Time, n), make([]*string, n)
	segments, segs := make([]*int16, n), make([]int16, n)
	for i := range events {
		e := &events[i]
		ids[i], times[i], kinds[i], outcomes[i], requests[i] = &e.ID, &e.Time, &e.Kind, &e.Outcome, &e.RequestID
		if e.ClientIP.IsValid() {
			ips[i] = &e.ClientIP
		}
		phones[i], reasons[i], providers[i], messages[i], keys[i] = null(&e.Phone), null(&e.Reason), null(&e.Provider), null(&e.MessageID), null(&e.APIKey)
		counts[i], subjects[i] = int32(min(e.Requests(), 1<<31-1)), null(&e.Subject)
		if e.Rollup() {
			lasts[i] = &e.LastAt
		}
		if e.Segments > 0 {
			segs[i] = int16(min(e.Segments, 1<<15-1))
			segments[i] = &segs[i]
		}
	}
	return []any{ids, times, kinds, outcomes, requests, phones, ips, reasons, providers, messages, keys, counts, lasts, subjects, segments}
}

// null is s, or nil (SQL NULL) for an empty string.
func null(s *string) *string {
	if *s == "" {
		return nil
	}
	return s
}

var (
	columnList = strings.Join(columns, ", ")
	// fromArrays is a batch as a table u, one row per event, from the
	// parameters arrays encodes: every statement below reads its rows from
	// it, in one round trip.
	fromArrays = `unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::inet[],
		$8::text[], $9::text[], $10::text[], $11::text[], $12::int[], $13::timestamptz[], $14::text[], $15::smallint[]) AS u(` + columnList + `)`
	// insertFresh stores rows seen for the first time (a COPY would take two
	// round trips, and the requests of a group wait for this one).
	insertFresh = `INSERT INTO audit_log (` + columnList + `) SELECT u.id::uuid, ` +
		strings.Join(columns[1:], ", ") + ` FROM ` + fromArrays
	// upsert stores rows in any state. A row written again (a retried batch,
	// a replayed spool) is stored once. A final outcome replaces only
	// "sending", so replaying a send's first row after its final one changes
	// nothing, and a rollup's count only grows (each write carries its
	// absolute count, see rollups), so replaying an older one changes
	// nothing either: rows may arrive in any order.
	upsert = insertFresh + `
		ON CONFLICT (id, created_at) DO UPDATE SET outcome = excluded.outcome, reason = excluded.reason,
			provider = excluded.provider, provider_message_id = excluded.provider_message_id,
			count = greatest(audit_log.count, excluded.count), last_at = greatest(audit_log.last_at, excluded.last_at),
			phone_e164 = excluded.phone_e164, client_ip = excluded.client_ip, api_key = excluded.api_key,
			segments = coalesce(excluded.segments, audit_log.segments)
		WHERE (audit_log.outcome = '` + otp.OutcomeSending + `' AND excluded.outcome <> '` + otp.OutcomeSending + `')
			OR excluded.count > audit_log.count`
	// mapped follows a statement named done that returns the rows it
	// stored or changed: it notes the message ids of those rows in
	// audit_message_ids, where delivery receipts look them up, and names
	// the rows. A row's message id is set once (with its final outcome), so
	// it is noted once however often the row is written.
	mapped = `, mapped AS (
		INSERT INTO audit_message_ids (provider, message_id, id, created_at)
		SELECT provider, provider_message_id, id, created_at FROM done
		WHERE provider IS NOT NULL AND provider_message_id IS NOT NULL
	)
	SELECT id::text FROM done`
	// finishSending replaces "sending" with final outcomes, and names the
	// rows it changed. It sets no indexed column of audit_log, so, with the
	// room fillfactor keeps on each page, the new versions are mostly HOT
	// (migration 006).
	finishSending = `WITH done AS (
		UPDATE audit_log a
		SET outcome = u.outcome, reason = u.reason, provider = u.provider, provider_message_id = u.provider_message_id,
			segments = coalesce(u.segments, a.segments)
		FROM ` + fromArrays + `
		WHERE a.id = u.id::uuid AND a.created_at = u.created_at AND a.outcome = '` + otp.OutcomeSending + `'
		RETURNING a.id, a.created_at, a.provider, a.provider_message_id
	)` + mapped
	// insertFreshMapped and upsertMapped are insertFresh and upsert for
	// rows that carry a message id.
	insertFreshMapped = `WITH done AS (` + insertFresh + ` RETURNING id, created_at, provider, provider_message_id)` + mapped
	upsertMapped      = `WITH done AS (` + upsert + ` RETURNING id, created_at, provider, provider_message_id)` + mapped
)

// Write stores events in any state, in one statement. Rows already stored
// are skipped, and a send's final outcome replaces its "sending", so a batch
// may be written again, and in any order, after an ambiguous failure or from
// a spool.
func Write(ctx context.Context, pool *pgxpool.Pool, events []otp.AuditEvent) error {
	events = latest(events)
	if _, err := pool.Exec(ctx, pick(events, upsert, upsertMapped), arrays(events)...); err != nil {
		return fmt.Errorf("audit: write %d rows: %w", len(events), err)
	}
	return applyEarlyReceipts(ctx, pool, events)
}

// writeGroup stores a group as the writer forms it, the cheap way: rows
// seen for the first time go straight into audit_log by one INSERT ... FROM
// unnest (one round trip: COPY takes two, and a request waits for this
// write), and sends' final outcomes replace their "sending" rows in one
// UPDATE; only a final outcome whose row is not there as "sending" (its
// first row is still in a spool, or the group is a retry) goes through the
// upsert, as do rollups, which are written again every second they grow. A
// first row that is stored already (the group is a retry) fails the INSERT;
// then the group is written by Write.
func writeGroup(ctx context.Context, pool *pgxpool.Pool, fresh, finals, rollups []otp.AuditEvent) error {
	var err error
	switch {
	case len(fresh) == 0 && len(finals) == 0:
	case len(finals) == 0:
		_, err = pool.Exec(ctx, pick(fresh, insertFresh, insertFreshMapped), arrays(fresh)...)
	case len(fresh) == 0:
		err = finish(ctx, pool, finals)
	default:
		err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, pick(fresh, insertFresh, insertFreshMapped), arrays(fresh)...); err != nil {
				return err
			}
			return finish(ctx, tx, finals)
		})
	}
	if err == nil && len(rollups) > 0 {
		_, err = pool.Exec(ctx, upsert, arrays(latest(rollups))...) // rollups carry no message id
	}
	all := slices.Concat(fresh, finals, rollups)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" { // unique_violation: a retry
		return Write(ctx, pool, all)
	}
	if err != nil {
		return fmt.Errorf("audit: write %d rows: %w", len(all), err)
	}
	return applyEarlyReceipts(ctx, pool, all)
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// finish writes sends' final outcomes: one UPDATE for the rows stored as
// "sending" (nearly all), the upsert for the rest.
func finish(ctx context.Context, q querier, finals []otp.AuditEvent) error {
	finals = latest(finals)
	rows, err := q.Query(ctx, finishSending, arrays(finals)...)
	if err != nil {
		return err
	}
	done, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	if len(done) == len(finals) {
		return nil
	}
	finished := make(map[string]bool, len(done))
	for _, id := range done {
		finished[id] = true
	}
	rest := slices.DeleteFunc(finals, func(e otp.AuditEvent) bool { return finished[e.ID] })
	_, err = q.Exec(ctx, pick(rest, upsert, upsertMapped), arrays(rest)...)
	return err
}

// pick is plain when no event carries a message id, else noting, which
// also notes them for delivery receipts.
func pick(events []otp.AuditEvent, plain, noting string) string {
	for _, e := range events {
		if e.MessageID != "" {
			return noting
		}
	}
	return plain
}

// latest keeps the last version of each row in a batch (a send's final
// outcome after its "sending", a rollup's largest count): one statement may
// not change a row twice.
func latest(events []otp.AuditEvent) []otp.AuditEvent {
	seen := make(map[string]int, len(events))
	out := events[:0:0]
	for _, e := range events {
		if i, ok := seen[e.ID]; ok {
			if out[i].Outcome == otp.OutcomeSending || e.Count > out[i].Count {
				out[i] = e
			}
			continue
		}
		seen[e.ID] = len(out)
		out = append(out, e)
	}
	return out
}

// refusedData reports whether Postgres refused a write for the data in it (a
// NUL byte, invalid UTF-8, a malformed id...) rather than for being away:
// writing it again cannot help, but writing its rows apart finds the bad one.
func refusedData(err error) (*pgconn.PgError, bool) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return nil, false
	}
	class := pgErr.Code[:2]
	return pgErr, class == "22" || (class == "23" && pgErr.Code != "23505")
}
