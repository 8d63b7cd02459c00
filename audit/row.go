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

// columns are the audit_log columns the service writes, in the order values
// and arrays encode them. Adding a column is a migration, a field of
// otp.AuditEvent, and an entry here, in values, in arrays and in insertFresh.
var columns = []string{"id", "created_at", "kind", "outcome", "request_id", "phone_e164", "client_ip", "reason",
	"provider", "provider_message_id", "api_key"}

// values encodes a row for the staging table's COPY, in the order of columns.
func values(e otp.AuditEvent) []any {
	var ip *netip.Addr
	if e.ClientIP.IsValid() {
		ip = &e.ClientIP
	}
	return []any{e.ID, e.Time, e.Kind, e.Outcome, e.RequestID, null(e.Phone), ip, null(e.Reason),
		null(e.Provider), null(e.MessageID), null(e.APIKey)}
}

// insertFresh stores rows seen for the first time: one statement, one round
// trip, where COPY takes two and a goroutine of pgx's.
var insertFresh = fmt.Sprintf(`INSERT INTO audit_log (%s)
	SELECT id::uuid, created_at, kind, outcome, request_id, phone_e164, client_ip, reason, provider, provider_message_id, api_key
	FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::inet[],
		$8::text[], $9::text[], $10::text[], $11::text[])
	AS u(id, created_at, kind, outcome, request_id, phone_e164, client_ip, reason, provider, provider_message_id, api_key)`, columnList)

// arrays encodes rows for insertFresh: one array per column, in the order of
// columns.
func arrays(events []otp.AuditEvent) []any {
	n := len(events)
	ids, kinds, outcomes, requests := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	times := make([]time.Time, n)
	ips := make([]*netip.Addr, n)
	phones, reasons, providers, messages, keys := make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
	for i := range events {
		e := &events[i]
		ids[i], times[i], kinds[i], outcomes[i], requests[i] = e.ID, e.Time, e.Kind, e.Outcome, e.RequestID
		if e.ClientIP.IsValid() {
			ips[i] = &e.ClientIP
		}
		phones[i], reasons[i], providers[i], messages[i], keys[i] = null(e.Phone), null(e.Reason), null(e.Provider), null(e.MessageID), null(e.APIKey)
	}
	return []any{ids, times, kinds, outcomes, requests, phones, ips, reasons, providers, messages, keys}
}

func null(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

var (
	columnList = strings.Join(columns, ", ")
	// stage holds a batch on its way in: a temporary table per connection,
	// emptied at every commit. Its name changes with the column list, so a
	// connection older than a new column never uses a stale one.
	stage       = fmt.Sprintf("audit_stage_%d", len(columns))
	createStage = fmt.Sprintf(`CREATE TEMP TABLE IF NOT EXISTS %s ON COMMIT DELETE ROWS AS SELECT %s FROM audit_log WITH NO DATA`, stage, columnList)
	// A row written again (a retried batch, a replayed spool) is stored
	// once. A final outcome replaces only "sending", so replaying a send's
	// first row after its final one changes nothing: rows may arrive in any
	// order.
	upsert = fmt.Sprintf(`INSERT INTO audit_log (%[1]s) SELECT %[1]s FROM %[2]s
		ON CONFLICT (id, created_at) DO UPDATE SET outcome = excluded.outcome, reason = excluded.reason,
			provider = excluded.provider, provider_message_id = excluded.provider_message_id
		WHERE audit_log.outcome = '%[3]s' AND excluded.outcome <> '%[3]s'`, columnList, stage, otp.OutcomeSending)
)

// Write stores events in any state: one COPY into a staging table and one
// INSERT from it, in one transaction. Rows already stored are skipped, and a
// send's final outcome replaces its "sending", so a batch may be written
// again, and in any order, after an ambiguous failure or from a spool.
func Write(ctx context.Context, pool *pgxpool.Pool, events []otp.AuditEvent) error {
	events = latest(events)
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return upsertStaged(ctx, tx, events) })
	if err != nil {
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
// staging table. A first row that is stored already (the group is a retry)
// fails the INSERT; then the group is written by Write.
func writeGroup(ctx context.Context, pool *pgxpool.Pool, fresh, finals []otp.AuditEvent) error {
	var err error
	switch {
	case len(finals) == 0:
		_, err = pool.Exec(ctx, insertFresh, arrays(fresh)...)
	case len(fresh) == 0:
		err = finish(ctx, pool, finals)
	default:
		err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, insertFresh, arrays(fresh)...); err != nil {
				return err
			}
			return finish(ctx, tx, finals)
		})
	}
	all := slices.Concat(fresh, finals)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" { // unique_violation: a retry
		return Write(ctx, pool, all)
	}
	if err != nil {
		return fmt.Errorf("audit: write %d rows: %w", len(all), err)
	}
	return applyEarlyReceipts(ctx, pool, all)
}

// finishSending replaces "sending" with final outcomes, and names the rows
// it changed.
const finishSending = `UPDATE audit_log a
	SET outcome = u.outcome, reason = NULLIF(u.reason, ''), provider = NULLIF(u.provider, ''),
		provider_message_id = NULLIF(u.message_id, '')
	FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[])
		AS u(id, created_at, outcome, reason, provider, message_id)
	WHERE a.id = u.id::uuid AND a.created_at = u.created_at AND a.outcome = '` + otp.OutcomeSending + `'
	RETURNING a.id::text`

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Begin(ctx context.Context) (pgx.Tx, error)
}

// finish writes sends' final outcomes: one UPDATE for the rows stored as
// "sending" (nearly all), the staging table's upsert for the rest.
func finish(ctx context.Context, q querier, finals []otp.AuditEvent) error {
	finals = latest(finals)
	n := len(finals)
	ids, times := make([]string, n), make([]time.Time, n)
	outcomes, reasons, providers, messages := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i, e := range finals {
		ids[i], times[i], outcomes[i], reasons[i], providers[i], messages[i] = e.ID, e.Time, e.Outcome, e.Reason, e.Provider, e.MessageID
	}
	rows, err := q.Query(ctx, finishSending, ids, times, outcomes, reasons, providers, messages)
	if err != nil {
		return err
	}
	done, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	if len(done) == n {
		return nil
	}
	finished := make(map[string]bool, len(done))
	for _, id := range done {
		finished[id] = true
	}
	rest := slices.DeleteFunc(finals, func(e otp.AuditEvent) bool { return finished[e.ID] })
	return pgx.BeginFunc(ctx, q, func(tx pgx.Tx) error { return upsertStaged(ctx, tx, rest) })
}

func source(events []otp.AuditEvent) pgx.CopyFromSource {
	return pgx.CopyFromSlice(len(events), func(i int) ([]any, error) { return values(events[i]), nil })
}

func upsertStaged(ctx context.Context, tx pgx.Tx, events []otp.AuditEvent) error {
	if _, err := tx.Exec(ctx, createStage); err != nil {
		return err
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{stage}, columns, source(events)); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, upsert)
	return err
}

// latest keeps the last version of each row in a batch (a send's final
// outcome after its "sending"): one statement may not change a row twice.
func latest(events []otp.AuditEvent) []otp.AuditEvent {
	seen := make(map[string]int, len(events))
	out := events[:0:0]
	for _, e := range events {
		if i, ok := seen[e.ID]; ok {
			if out[i].Outcome == otp.OutcomeSending {
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
