package audit_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"smsgw/audit"
	"smsgw/internal/testenv"
	"smsgw/otp"
)

// TestFinalOutcomesAreHOTUpdates: a send's final outcome and its receipt
// set no indexed column of audit_log, and its pages keep room for the new
// versions, so both are HOT updates (migration 006); before, the final
// outcome set the indexed provider_message_id and never was.
func TestFinalOutcomesAreHOTUpdates(t *testing.T) {
	dsn := testenv.MigratedDatabase(t)
	pool := testenv.PoolOn(t, dsn)
	ctx := context.Background()
	w := newWriter(t, pool, audit.Options{WriteTimeout: time.Minute, FinalEvery: 10 * time.Millisecond})
	const sends = 20
	var finals []otp.AuditEvent
	for i := range sends {
		e := event(i)
		first := e
		first.Outcome, first.Provider, first.MessageID = otp.OutcomeSending, "", ""
		if err := w.Record(ctx, first); err != nil {
			t.Fatal(err)
		}
		finals = append(finals, e)
	}
	for _, e := range finals {
		w.Finish(e)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	d := audit.NewDeliveries(pool)
	for _, e := range finals {
		if err := d.Report(ctx, otp.DeliveryReport{Provider: e.Provider, MessageID: e.MessageID, Status: "delivered"}); err != nil {
			t.Fatal(err)
		}
	}
	var delivered int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM audit_log WHERE outcome = 'sent' AND delivery_status = 'delivered'").Scan(&delivered); err != nil || delivered != sends {
		t.Fatalf("%d rows sent and delivered (%v), want %d", delivered, err, sends)
	}
	// A backend's table statistics reach pg_stat_user_tables when it ends.
	pool.Close()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var updates, hot int
	testenv.WaitFor(t, 0, "the updates' statistics", func() bool {
		err := conn.QueryRow(ctx, `SELECT coalesce(sum(n_tup_upd), 0), coalesce(sum(n_tup_hot_upd), 0) FROM pg_stat_user_tables
			WHERE relid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'audit_log'::regclass)`).Scan(&updates, &hot)
		if err != nil {
			t.Fatal(err)
		}
		return updates >= 2*sends
	})
	if updates != 2*sends || hot != updates {
		t.Fatalf("%d updates of audit_log, %d of them HOT: want %d, all HOT", updates, hot, 2*sends)
	}
}

// TestMessageIDNotedOnce: whichever way a text's final outcome is written,
// and however often (a retried group, a replayed spool, in any order), its
// message id is noted once, and its receipts find its row.
func TestMessageIDNotedOnce(t *testing.T) {
	pool := testenv.Pool(t)
	ctx := context.Background()
	final := event(1)
	sending := final
	sending.Outcome, sending.Provider, sending.MessageID = otp.OutcomeSending, "", ""
	for _, batches := range [][][]otp.AuditEvent{
		{{sending}, {final}, {final}, {sending, final}},
		{{final}, {sending}, {final}},
		{{sending, final}, {final}},
	} {
		if _, err := pool.Exec(ctx, "TRUNCATE audit_log, audit_message_ids"); err != nil {
			t.Fatal(err)
		}
		for _, b := range batches {
			if err := audit.Write(ctx, pool, b); err != nil {
				t.Fatal(err)
			}
		}
		var noted int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM audit_message_ids WHERE id = $1 AND message_id = $2 AND provider = $3",
			final.ID, final.MessageID, final.Provider).Scan(&noted); err != nil || noted != 1 {
			t.Fatalf("%d batches: message id noted %d times (%v), want once", len(batches), noted, err)
		}
		if err := audit.NewDeliveries(pool).Report(ctx, otp.DeliveryReport{Provider: final.Provider, MessageID: final.MessageID, Status: "delivered"}); err != nil {
			t.Fatal(err)
		}
		if st, _ := deliveryOf(t, audit.NewReader(pool), final.ID); st != "delivered" {
			t.Fatalf("%d batches: receipt left the row %q", len(batches), st)
		}
	}
}

// TestMessageIDPartitionsFollowAuditLog: audit_message_ids has a partition
// for each of audit_log's, one made by hand included (the message ids it
// had in the default partition move to it), and retention drops both.
func TestMessageIDPartitionsFollowAuditLog(t *testing.T) {
	pool := testenv.Pool(t)
	ctx := context.Background()
	now := time.Date(2027, 3, 15, 12, 0, 0, 0, time.UTC)
	if _, err := pool.Exec(ctx, `CREATE TABLE audit_log_202610 PARTITION OF audit_log FOR VALUES FROM ('2026-10-01T00:00:00Z') TO ('2026-11-01T00:00:00Z')`); err != nil {
		t.Fatal(err)
	}
	old := event(1)
	old.Time = time.Date(2026, 10, 5, 0, 0, 0, 0, time.UTC)
	if err := audit.Write(ctx, pool, []otp.AuditEvent{old}); err != nil {
		t.Fatal(err)
	}
	if _, err := audit.Maintain(ctx, pool, now, 2, 0); err != nil {
		t.Fatal(err)
	}
	twins := func() map[string]bool {
		t.Helper()
		names := testenv.Strings(t, pool, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
			WHERE i.inhparent = 'audit_message_ids'::regclass`)
		got := map[string]bool{}
		for _, n := range names {
			got[n] = true
		}
		return got
	}
	for _, want := range []string{"audit_message_ids_202610", "audit_message_ids_202703", "audit_message_ids_202705", "audit_message_ids_default"} {
		if !twins()[want] {
			t.Fatalf("partitions %v lack %s", twins(), want)
		}
	}
	var moved int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM audit_message_ids_202610").Scan(&moved); err != nil || moved != 1 {
		t.Fatalf("%d message ids in their month's partition (%v), want 1", moved, err)
	}
	var fill int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'audit_log'::regclass AND NOT coalesce('fillfactor=70' = ANY (c.reloptions), false)`).Scan(&fill); err != nil || fill != 0 {
		t.Fatalf("%d audit_log partitions without fillfactor 70 (%v)", fill, err)
	}
	if _, err := audit.Maintain(ctx, pool, now, 2, 90*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	if twins()["audit_message_ids_202610"] {
		t.Fatal("retention dropped audit_log_202610 but kept its message ids")
	}
}
