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
	"github.com/jackc/pgx/v5/pgtype"
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
// must not change until the statement has run), and each column's type
// hands pgx its elements as pointers to types that give their value through
// pgtype's valuer interfaces (TextValuer, TimestamptzValuer, ...): pgx
// encodes an element without reflection and without copying it to the heap.
// The bytes are those pgx writes for []*string, []*time.Time and so on
// (TestArraysEncodeAsReflected). A group costs nine allocations, whatever
// its rows.
func arrays(events []otp.AuditEvent) []any {
	n := len(events)
	c := new(groupColumns)
	texts := make([]*textElem, textColumns*n)
	text := func(k int) []*textElem { return texts[k*n : (k+1)*n : (k+1)*n] }
	c.ids.elems, c.kinds.elems, c.outcomes.elems, c.requests.elems = text(0), text(1), text(2), text(3)
	c.phones.elems, c.reasons.elems, c.providers.elems, c.messages.elems = text(4), text(5), text(6), text(7)
	c.keys.elems, c.subjects.elems = text(8), text(9)
	times := make([]*timeElem, 2*n)
	c.times.elems, c.lasts.elems = times[:n:n], times[n:]
	c.ips.elems = make([]*inetElem, n)
	ints := make([]int4Elem, n)
	intp := make([]*int4Elem, n)
	c.counts.elems = intp
	segs := make([]int2Elem, n)
	c.segments.elems = make([]*int2Elem, n)
	for i := range events {
		e := &events[i]
		c.ids.elems[i], c.kinds.elems[i], c.outcomes.elems[i], c.requests.elems[i] = (*textElem)(&e.ID), (*textElem)(&e.Kind), (*textElem)(&e.Outcome), (*textElem)(&e.RequestID)
		c.times.elems[i] = (*timeElem)(&e.Time)
		if e.ClientIP.IsValid() {
			c.ips.elems[i] = (*inetElem)(&e.ClientIP)
		}
		c.phones.elems[i], c.reasons.elems[i], c.providers.elems[i] = null(&e.Phone), null(&e.Reason), null(&e.Provider)
		c.messages.elems[i], c.keys.elems[i], c.subjects.elems[i] = null(&e.MessageID), null(&e.APIKey), null(&e.Subject)
		ints[i] = int4Elem(min(e.Requests(), 1<<31-1))
		intp[i] = &ints[i]
		if e.Rollup() {
			c.lasts.elems[i] = (*timeElem)(&e.LastAt)
		}
		if e.Segments > 0 {
			segs[i] = int2Elem(min(e.Segments, 1<<15-1))
			c.segments.elems[i] = &segs[i]
		}
	}
	return []any{&c.ids, &c.times, &c.kinds, &c.outcomes, &c.requests, &c.phones, &c.ips, &c.reasons, &c.providers,
		&c.messages, &c.keys, &c.counts, &c.lasts, &c.subjects, &c.segments}
}

// textColumns is how many of columns are text.
const textColumns = 10

// groupColumns are a group's arrays, made in one allocation.
type groupColumns struct {
	ids, kinds, outcomes, requests, phones, reasons, providers, messages, keys, subjects column[textElem]
	times, lasts                                                                         column[timeElem]
	ips                                                                                  column[inetElem]
	counts                                                                               column[int4Elem]
	segments                                                                             column[int2Elem]
}

// column is one column's array, a pgtype.ArrayGetter of one dimension
// whose elements are pointers (nil for NULL).
type column[E any] struct {
	dims  [1]pgtype.ArrayDimension
	elems []*E
}

func (c *column[E]) Dimensions() []pgtype.ArrayDimension {
	if c.elems == nil {
		return nil
	}
	c.dims[0] = pgtype.ArrayDimension{Length: int32(len(c.elems)), LowerBound: 1}
	return c.dims[:]
}

func (c *column[E]) Index(i int) any { return c.elems[i] }

func (c *column[E]) IndexType() any { return new(E) }

// TextValue is the column in PostgreSQL's text form, for a connection that
// sends its arguments as text of no type (pgx's simple protocol and exec
// modes), where pgx found the reflected slices' array types by their Go
// types: the text pgx writes for the array of c's type.
func (c *column[E]) TextValue() (pgtype.Text, error) {
	var oid uint32
	switch any(c).(type) {
	case *column[textElem]:
		oid = pgtype.TextArrayOID
	case *column[timeElem]:
		oid = pgtype.TimestamptzArrayOID
	case *column[inetElem]:
		oid = pgtype.InetArrayOID
	case *column[int4Elem]:
		oid = pgtype.Int4ArrayOID
	case *column[int2Elem]:
		oid = pgtype.Int2ArrayOID
	}
	buf, err := pgtype.NewMap().Encode(oid, pgtype.TextFormatCode, arrayOnly{c}, nil)
	if err != nil || buf == nil {
		return pgtype.Text{}, err
	}
	return pgtype.Text{String: string(buf), Valid: true}, nil
}

// arrayOnly is a column that pgx sees only as an array.
type arrayOnly struct{ pgtype.ArrayGetter }

// The elements, each a pointer to a row's field: text, timestamptz, inet,
// int and smallint, valued as pgx values a string, a time.Time, a
// netip.Addr, an int32 and an int16.
type (
	textElem string
	timeElem time.Time
	inetElem netip.Addr
	int4Elem int32
	int2Elem int16
)

func (t *textElem) TextValue() (pgtype.Text, error) {
	return pgtype.Text{String: string(*t), Valid: true}, nil
}

func (t *timeElem) TimestamptzValue() (pgtype.Timestamptz, error) {
	return pgtype.Timestamptz{Time: time.Time(*t), Valid: true}, nil
}

func (a *inetElem) NetipPrefixValue() (netip.Prefix, error) {
	addr := netip.Addr(*a)
	if !addr.IsValid() {
		return netip.Prefix{}, nil
	}
	return netip.PrefixFrom(addr, addr.BitLen()), nil
}

func (n *int4Elem) Int64Value() (pgtype.Int8, error) {
	return pgtype.Int8{Int64: int64(*n), Valid: true}, nil
}

func (n *int2Elem) Int64Value() (pgtype.Int8, error) {
	return pgtype.Int8{Int64: int64(*n), Valid: true}, nil
}

// null is s, or nil (SQL NULL) for an empty string.
func null(s *string) *textElem {
	if *s == "" {
		return nil
	}
	return (*textElem)(s)
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
	// The ids of the rows it changed, in one buffer: only a group with a
	// row that was not "sending" (rare) needs them by name, and a string
	// scanned a row was three allocations.
	ids, ends := make([]byte, 0, 36*len(finals)), make([]int, 0, len(finals))
	for rows.Next() {
		ids = append(ids, rows.RawValues()[0]...)
		ends = append(ends, len(ids))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(ends) == len(finals) {
		return nil
	}
	finished := make(map[string]bool, len(ends))
	start := 0
	for _, end := range ends {
		finished[string(ids[start:end])] = true
		start = end
	}
	rest := slices.DeleteFunc(slices.Clone(finals), func(e otp.AuditEvent) bool { return finished[e.ID] })
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
//
// A batch whose ids are all distinct (nearly every one) is itself, not a
// copy: its caller must not change it.
func latest(events []otp.AuditEvent) []otp.AuditEvent {
	if distinct(events) {
		return events
	}
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

// distinct reports whether no two events share an id: by comparing each
// pair in a small batch, by a set in a large one.
func distinct(events []otp.AuditEvent) bool {
	if len(events) <= 16 {
		for i := range events {
			for j := i + 1; j < len(events); j++ {
				if events[i].ID == events[j].ID {
					return false
				}
			}
		}
		return true
	}
	seen := make(map[string]struct{}, len(events))
	for i := range events {
		if _, ok := seen[events[i].ID]; ok {
			return false
		}
		seen[events[i].ID] = struct{}{}
	}
	return true
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
