package migrations_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"smsgw/internal/testenv"
	"smsgw/migrations"
)

func TestApplyIsOrderedIdempotentAndSafeConcurrently(t *testing.T) {
	dsn := testenv.Database(t)
	ctx := context.Background()
	all, err := migrations.All()
	if err != nil || len(all) == 0 {
		t.Fatalf("migrations: %v %v", all, err)
	}
	applied := make([][]string, 3)
	testenv.Race(t, len(applied), func(i int) string {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Error(err)
			return ""
		}
		defer conn.Close(ctx)
		applied[i], err = migrations.Apply(ctx, conn)
		if err != nil {
			t.Error(err)
		}
		return ""
	})
	total := 0
	for _, a := range applied {
		total += len(a)
	}
	if total != len(all) {
		t.Fatalf("three racing processes applied %d migrations in all, want each of %d once: %v", total, len(all), applied)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM schema_migrations").Scan(&n); err != nil || n != len(all) {
		t.Fatalf("schema_migrations holds %d rows (%v)", n, err)
	}
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM audit_log").Scan(&n); err != nil {
		t.Fatalf("audit_log missing: %v", err)
	}
}

func TestEnsureDatabaseCreatesIt(t *testing.T) {
	ctx := context.Background()
	name := "smsgw_test_ensure_" + testenv.Unique()
	dsn := testenv.WithDatabase(testenv.PostgresURL(), name)
	admin, err := pgx.Connect(ctx, testenv.PostgresURL())
	if err != nil {
		testenv.Unavailable(t, "Postgres", err)
	}
	// The admin connection outlives the test's body: the cleanup drops the
	// database through it, even when the test fails.
	t.Cleanup(func() {
		if _, err := admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
		admin.Close(context.Background())
	})
	for i := 0; i < 2; i++ { // the second call finds it
		created, err := migrations.EnsureDatabase(ctx, dsn)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if created != (i == 0) {
			t.Fatalf("call %d says created = %v", i, created)
		}
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("database not created: %v", err)
	}
	conn.Close(ctx)
}

// TestPartitioningKeepsExistingRows applies the migrations up to 003, fills
// audit_log as a deployment would have, then applies the rest: every row is
// still there, in its month's partition, with the same id.
func TestPartitioningKeepsExistingRows(t *testing.T) {
	dsn := testenv.Database(t)
	ctx := context.Background()
	conn, all := migratedUpTo(t, dsn, 3)
	_, err := conn.Exec(ctx, `INSERT INTO audit_log (id, created_at, kind, outcome, request_id, phone_e164)
		SELECT gen_random_uuid(), now() - make_interval(days => g * 20), 'send', 'sent', 'r' || g, '+14155552671'
		FROM generate_series(0, 9) g`)
	if err != nil {
		t.Fatal(err)
	}
	applied, err := migrations.Apply(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) != len(all)-3 {
		t.Fatalf("applied %v", applied)
	}
	var n, parts int
	conn.QueryRow(ctx, "SELECT count(*) FROM audit_log").Scan(&n)
	conn.QueryRow(ctx, `SELECT count(DISTINCT tableoid) FROM audit_log`).Scan(&parts)
	if n != 10 || parts < 6 {
		t.Fatalf("%d rows in %d partitions, want 10 rows spread over their months", n, parts)
	}
	var inDefault int
	conn.QueryRow(ctx, "SELECT count(*) FROM audit_log_default").Scan(&inDefault)
	if inDefault != 0 {
		t.Fatalf("%d rows in the default partition: every month that held rows gets its own", inDefault)
	}
}

// TestMessageIDsOfExistingRows applies the migrations up to 005, stores
// texts as a deployment would have (one in a month long gone to the default
// partition), then the rest: every text's message id is noted in
// audit_message_ids, in its month's partition, so its receipts still find
// it; audit_log no longer indexes the message id, and its partitions keep
// room for updated rows.
func TestMessageIDsOfExistingRows(t *testing.T) {
	dsn := testenv.Database(t)
	ctx := context.Background()
	conn, _ := migratedUpTo(t, dsn, 5)
	_, err := conn.Exec(ctx, `INSERT INTO audit_log (id, created_at, kind, outcome, request_id, phone_e164, provider, provider_message_id)
		SELECT gen_random_uuid(), now() - make_interval(days => g * 200), 'send', 'sent', 'r' || g, '+14155552671', 'twilio', 'SM' || g
		FROM generate_series(0, 2) g
		UNION ALL SELECT gen_random_uuid(), now(), 'send', 'sending', 'r9', '+14155552671', NULL, NULL`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.Apply(ctx, conn); err != nil {
		t.Fatal(err)
	}
	var noted, inPlace int
	if err := conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE m.tableoid::regclass::text = 'audit_message_ids' || substr(a.tableoid::regclass::text, 10))
		FROM audit_message_ids m JOIN audit_log a USING (id, created_at)
		WHERE a.provider = m.provider AND a.provider_message_id = m.message_id`).Scan(&noted, &inPlace); err != nil {
		t.Fatal(err)
	}
	if noted != 3 || inPlace != 3 {
		t.Fatalf("%d texts noted, %d in their audit_log partition's twin; want 3 and 3", noted, inPlace)
	}
	var indexed, packed int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE tablename LIKE 'audit_log%' AND indexdef LIKE '%provider_message_id%'`).Scan(&indexed); err != nil || indexed != 0 {
		t.Fatalf("%d indexes of audit_log on provider_message_id (%v), want none: the final-outcome UPDATE could not be HOT", indexed, err)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'audit_log'::regclass AND NOT coalesce('fillfactor=70' = ANY (c.reloptions), false)`).Scan(&packed); err != nil || packed != 0 {
		t.Fatalf("%d audit_log partitions without fillfactor 70 (%v)", packed, err)
	}
}

// migratedUpTo connects to dsn (closed when the test ends) and applies the
// first n migrations as Apply would have, returning them all.
func migratedUpTo(t *testing.T, dsn string, n int) (*pgx.Conn, []migrations.Migration) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	for _, m := range all[:n] {
		if _, err := conn.Exec(ctx, m.SQL); err != nil {
			t.Fatalf("%s: %v", m.Version, err)
		}
		if _, err := conn.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES ($1)", m.Version); err != nil {
			t.Fatal(err)
		}
	}
	return conn, all
}
