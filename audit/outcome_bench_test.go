package audit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"smsgw/internal/testenv"
	"smsgw/migrations"
	"smsgw/otp"
)

// A send's final outcome, as the benchmark writes it one way or another.
type outcomeWay struct {
	name string
	// schema runs after migrations 001-005 (upTo "005") or after all of
	// them (upTo ""), on a database of the benchmark's own.
	upTo, schema string
	// finish writes final outcomes from fromArrays' parameters; receipt
	// moves a text's delivery status ($1 provider, $2 message id, $3
	// status, $4 error code), as Deliveries.Report does.
	finish, receipt string
	// appends: the final outcome is a row of its own, audit_log's stays.
	appends bool
}

// fillfactor sets every audit_log partition's fillfactor: new pages keep
// that much of themselves for later versions of their rows.
func fillfactor(n int) string {
	return fmt.Sprintf(`DO $$ DECLARE p regclass; BEGIN
		FOR p IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'audit_log'::regclass LOOP
			EXECUTE format('ALTER TABLE %%s SET (fillfactor = %d)', p);
		END LOOP; END $$;`, n)
}

const (
	// The final-outcome UPDATE and the receipt before issue 23.
	finishToday = `UPDATE audit_log a
	SET outcome = u.outcome, reason = u.reason, provider = u.provider, provider_message_id = u.provider_message_id
	FROM ` + "%s" + `
	WHERE a.id = u.id::uuid AND a.created_at = u.created_at AND a.outcome = 'sending'
	RETURNING a.id::text`
	receiptToday = storeReceipt + `
		UPDATE audit_log
		SET delivery_status = $3, delivery_error_code = NULLIF($4, ''), delivery_updated_at = now()
		WHERE provider = $1 AND provider_message_id = $2
		  AND smsgw_delivery_rank(coalesce(delivery_status, '')) <= smsgw_delivery_rank($3)`

	// A narrow table finds a text's row by its message id, so audit_log's
	// UPDATE sets no indexed column.
	messageIDs = `DROP INDEX audit_log_provider_message_id;
	CREATE TABLE bench_message_ids (provider text NOT NULL, message_id text NOT NULL, id uuid NOT NULL, created_at timestamptz NOT NULL)
		PARTITION BY RANGE (created_at);
	CREATE INDEX ON bench_message_ids (message_id);
	CREATE TABLE bench_message_ids_default PARTITION OF bench_message_ids DEFAULT;`
	finishMapped = `WITH done AS (
		UPDATE audit_log a
		SET outcome = u.outcome, reason = u.reason, provider = u.provider, provider_message_id = u.provider_message_id
		FROM %s
		WHERE a.id = u.id::uuid AND a.created_at = u.created_at AND a.outcome = 'sending'
		RETURNING a.id, a.created_at, a.provider, a.provider_message_id
	), mapped AS (
		INSERT INTO bench_message_ids (provider, message_id, id, created_at)
		SELECT provider, provider_message_id, id, created_at FROM done
		WHERE provider IS NOT NULL AND provider_message_id IS NOT NULL
	)
	SELECT id::text FROM done`
	// receiptThrough finds a receipt's row through a table (%[1]s) that
	// has its message id (in column %[2]s).
	receiptThrough = storeReceipt + `
		UPDATE audit_log a
		SET delivery_status = $3, delivery_error_code = NULLIF($4, ''), delivery_updated_at = now()
		FROM %[1]s m
		WHERE m.%[2]s = $2 AND m.provider = $1 AND a.id = m.id AND a.created_at = m.created_at
		  AND smsgw_delivery_rank(coalesce(a.delivery_status, '')) <= smsgw_delivery_rank($3)`

	// The final outcome as a row of its own that readers would join.
	outcomes = `CREATE TABLE bench_outcomes (id uuid, created_at timestamptz, outcome text NOT NULL, reason text,
		provider text, provider_message_id text, PRIMARY KEY (id, created_at));
	CREATE INDEX ON bench_outcomes (provider_message_id);`
	finishAppended = `INSERT INTO bench_outcomes (id, created_at, outcome, reason, provider, provider_message_id)
		SELECT u.id::uuid, u.created_at, u.outcome, u.reason, u.provider, u.provider_message_id FROM %s
		ON CONFLICT DO NOTHING`
)

func outcomeWays() []outcomeWay {
	with := func(sql string) string { return fmt.Sprintf(sql, fromArrays) }
	receiptMapped := fmt.Sprintf(receiptThrough, "bench_message_ids", "message_id")
	receiptAppended := fmt.Sprintf(receiptThrough, "bench_outcomes", "provider_message_id")
	return []outcomeWay{
		{name: "today", upTo: "005", finish: with(finishToday), receipt: receiptToday},
		{name: "fillfactor-80", upTo: "005", schema: fillfactor(80), finish: with(finishToday), receipt: receiptToday},
		{name: "message-ids-table", upTo: "005", schema: messageIDs, finish: with(finishMapped), receipt: receiptMapped},
		{name: "message-ids-table-fillfactor-80", upTo: "005", schema: messageIDs + fillfactor(80), finish: with(finishMapped), receipt: receiptMapped},
		// What ships: migration 006 (audit_message_ids, fillfactor 70).
		{name: "shipped-message-ids-fillfactor-70", finish: finishSending, receipt: report},
		{name: "message-ids-table-fillfactor-60", upTo: "005", schema: messageIDs + fillfactor(60), finish: with(finishMapped), receipt: receiptMapped},
		{name: "message-ids-table-fillfactor-50", upTo: "005", schema: messageIDs + fillfactor(50), finish: with(finishMapped), receipt: receiptMapped},
		{name: "appended-outcome-fillfactor-80", upTo: "005", schema: outcomes + fillfactor(80), finish: with(finishAppended), receipt: receiptAppended, appends: true},
	}
}

// BenchmarkFinalOutcome measures the second Postgres write of a send, its
// final outcome, the ways outcomeWays lists, each on a database of its own,
// in interleaved rounds (SMSGW_BENCH_ROUNDS, default 3; medians). A round
// is, per way, 1,000 sends as the writer makes them (first rows in groups
// of 10, final outcomes 50 a group, written while later sends' first rows go
// in), then one "delivered" receipt per text. For the final-outcome write it
// reports rows/s, WAL bytes and full-page images per send (EXPLAIN (ANALYZE,
// WAL): the statement's own, whatever else the shared server does; "lsn" is
// pg_current_wal_lsn's difference around it, everyone's WAL) and the share
// of audit_log updates that were HOT; then the same for receipts, and the
// audit tables' bytes per send at the end (heap, indexes, narrow tables; a
// VACUUM after each round, as autovacuum would, so space dead row versions
// leave is reused). Run it alone:
//
//	go test -run '^$' -bench FinalOutcome -benchtime 1x -v ./audit
func BenchmarkFinalOutcome(b *testing.B) {
	ways := outcomeWays()
	conns := make([]*pgx.Conn, len(ways))
	for i, way := range ways {
		conns[i] = outcomeDatabase(b, way)
	}
	rounds := testenv.BenchRounds(b, 3)
	got := make([][]outcomeRound, len(ways))
	for b.Loop() {
		for range rounds {
			for i, way := range ways {
				got[i] = append(got[i], benchOutcome(b, conns[i], way))
			}
		}
	}
	b.Logf("%d rounds of %d sends a way, medians; uptime: %s", rounds, benchSends, loadAverage())
	b.Logf("%-32s %9s %9s %9s %7s %7s %9s %9s %7s %9s %9s", "way", "final/s", "WAL B", "lsn B", "FPI", "HOT %",
		"first B", "rcpt WAL", "HOT %", "rcpt/s", "size B")
	for i, way := range ways {
		m := func(f func(outcomeRound) float64) float64 {
			xs := make([]float64, len(got[i]))
			for j, r := range got[i] {
				xs[j] = f(r)
			}
			return testenv.Median(xs)
		}
		var size int64
		if err := conns[i].QueryRow(context.Background(), `SELECT sum(pg_total_relation_size(oid)) FROM pg_class
			WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace
			  AND relname NOT IN ('delivery_receipts', 'schema_migrations')`).Scan(&size); err != nil {
			b.Fatal(err)
		}
		n := float64(benchSends)
		b.Logf("%-32s %9.0f %9.0f %9.0f %7.2f %7.1f %9.0f %9.0f %7.1f %9.0f %9.0f", way.name,
			m(func(r outcomeRound) float64 { return n / r.finalTime.Seconds() }),
			m(func(r outcomeRound) float64 { return float64(r.final.bytes) / n }),
			m(func(r outcomeRound) float64 { return float64(r.lsn) / n }),
			m(func(r outcomeRound) float64 { return float64(r.final.fpi) / n }),
			m(func(r outcomeRound) float64 { return 100 * float64(r.hot) / float64(max(r.updates, 1)) }),
			m(func(r outcomeRound) float64 { return float64(r.first.bytes) / n }),
			m(func(r outcomeRound) float64 { return float64(r.receipts.bytes) / n }),
			m(func(r outcomeRound) float64 { return 100 * float64(r.receiptHOT) / float64(max(r.receiptUpdates, 1)) }),
			m(func(r outcomeRound) float64 { return n / r.receiptTime.Seconds() }),
			float64(size)/float64(len(got[i])*benchSends))
	}
}

const (
	benchSends      = 1000
	benchFirstGroup = 10
	benchFinalGroup = 50
)

// outcomeRound is what one round of a way measured.
type outcomeRound struct {
	first, final, receipts     walUse
	lsn                        int64
	finalTime, receiptTime     time.Duration
	updates, hot               int64
	receiptUpdates, receiptHOT int64
}

// outcomeDatabase is a connection to a database of the benchmark's own with
// way's schema, dropped when the benchmark ends.
func outcomeDatabase(b *testing.B, way outcomeWay) *pgx.Conn {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testenv.Database(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close(ctx) })
	all, err := migrations.All()
	if err != nil {
		b.Fatal(err)
	}
	for _, m := range all {
		if way.upTo != "" && m.Version > way.upTo+"~" {
			break
		}
		if _, err := conn.Exec(ctx, m.SQL); err != nil {
			b.Fatalf("%s: %v", m.Version, err)
		}
	}
	if way.schema != "" {
		if _, err := conn.Exec(ctx, way.schema); err != nil {
			b.Fatalf("%s: %v", way.name, err)
		}
	}
	return conn
}

func benchOutcome(b *testing.B, conn *pgx.Conn, way outcomeWay) outcomeRound {
	var r outcomeRound
	rows := make([]otp.AuditEvent, benchSends)
	for i := range rows {
		rows[i] = benchSend(i)
	}
	u0, h0 := updates(b, conn)
	finished := 0
	for next := 0; next < len(rows); next += benchFirstGroup {
		sending := make([]otp.AuditEvent, benchFirstGroup)
		for i, e := range rows[next : next+benchFirstGroup] {
			e.Outcome, e.Provider, e.MessageID = otp.OutcomeSending, "", ""
			sending[i] = e
		}
		r.first.add(explain(b, conn, insertFresh, arrays(sending)...))
		// Final outcomes lag their first rows by a group, as the
		// writer's 50 ms do.
		for ; finished+2*benchFinalGroup <= next+benchFirstGroup; finished += benchFinalGroup {
			writeFinals(b, conn, way, &r, rows[finished:finished+benchFinalGroup])
		}
	}
	for ; finished < len(rows); finished += benchFinalGroup {
		writeFinals(b, conn, way, &r, rows[finished:min(finished+benchFinalGroup, len(rows))])
	}
	u1, h1 := updates(b, conn)
	for _, e := range rows {
		start := time.Now()
		r.receipts.add(explain(b, conn, way.receipt, e.Provider, e.MessageID, "delivered", ""))
		r.receiptTime += time.Since(start)
	}
	u2, h2 := updates(b, conn)
	// Autovacuum's work, done now: the next round reuses the space dead
	// row versions leave (the size column is the steady state's).
	if _, err := conn.Exec(context.Background(), "VACUUM"); err != nil {
		b.Fatal(err)
	}
	r.updates, r.hot, r.receiptUpdates, r.receiptHOT = u1-u0, h1-h0, u2-u1, h2-h1
	if !way.appends && r.updates != benchSends {
		b.Fatalf("%s: %d final outcomes updated %d audit_log rows", way.name, benchSends, r.updates)
	}
	if way.appends {
		r.updates = benchSends
	}
	return r
}

// writeFinals writes final outcomes the way way does, into r.
func writeFinals(b *testing.B, conn *pgx.Conn, way outcomeWay, r *outcomeRound, rows []otp.AuditEvent) {
	b.Helper()
	before := lsn(b, conn)
	start := time.Now()
	r.final.add(explain(b, conn, way.finish, arrays(rows)...))
	r.finalTime += time.Since(start)
	r.lsn += lsn(b, conn) - before
}

// lsn is where the server's WAL is.
func lsn(b *testing.B, conn *pgx.Conn) int64 {
	b.Helper()
	var at int64
	if err := conn.QueryRow(context.Background(), "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint").Scan(&at); err != nil {
		b.Fatal(err)
	}
	return at
}

// loadAverage is /proc/loadavg's first three fields.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// benchSend is a send as it reaches the writer: a new number and a new
// address each, a Twilio-like message id.
func benchSend(i int) otp.AuditEvent {
	phone, _ := rand.Int(rand.Reader, big.NewInt(1e9))
	var ip [4]byte
	var sid, req [16]byte
	rand.Read(ip[:])
	rand.Read(sid[:])
	rand.Read(req[:])
	return otp.AuditEvent{
		ID: uuid.Must(uuid.NewV7()).String(), Time: time.Now().UTC(), Kind: otp.KindSend, Outcome: otp.OutcomeSent,
		RequestID: hex.EncodeToString(req[:]), Phone: fmt.Sprintf("+1415%09d", phone), ClientIP: netip.AddrFrom4(ip),
		Provider: "twilio", MessageID: "SM" + hex.EncodeToString(sid[:]), APIKey: fmt.Sprintf("key-%d", i%3),
	}
}

// walUse is what statements wrote to the WAL.
type walUse struct{ records, fpi, bytes int64 }

func (w *walUse) add(o walUse) {
	w.records, w.fpi, w.bytes = w.records+o.records, w.fpi+o.fpi, w.bytes+o.bytes
}

// explain runs sql and reports the WAL it wrote (its own, counted by the
// executor, whatever else the server does).
func explain(b *testing.B, conn *pgx.Conn, sql string, args ...any) walUse {
	b.Helper()
	var out []byte
	if err := conn.QueryRow(context.Background(), "EXPLAIN (ANALYZE, WAL, TIMING OFF, COSTS OFF, FORMAT JSON) "+sql, args...).Scan(&out); err != nil {
		b.Fatalf("%v: %s", err, strings.Fields(sql)[0])
	}
	var plan []struct {
		Plan struct {
			Records int64 `json:"WAL Records"`
			FPI     int64 `json:"WAL FPI"`
			Bytes   int64 `json:"WAL Bytes"`
		}
	}
	if err := json.Unmarshal(out, &plan); err != nil || len(plan) != 1 {
		b.Fatalf("explain: %v %s", err, out)
	}
	return walUse{plan[0].Plan.Records, plan[0].Plan.FPI, plan[0].Plan.Bytes}
}

// updates counts the updates of audit_log's partitions so far, and the HOT
// ones, this connection's included.
func updates(b *testing.B, conn *pgx.Conn) (all, hot int64) {
	b.Helper()
	ctx := context.Background()
	if _, err := conn.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
		b.Fatal(err)
	}
	err := conn.QueryRow(ctx, `SELECT coalesce(sum(n_tup_upd), 0), coalesce(sum(n_tup_hot_upd), 0) FROM pg_stat_user_tables
		WHERE relid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'audit_log'::regclass)`).Scan(&all, &hot)
	if err != nil {
		b.Fatal(err)
	}
	return all, hot
}
