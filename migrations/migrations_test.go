package migrations_test

import (
	"context"
	"sync"
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
	var wg sync.WaitGroup
	applied := make([][]string, 3)
	for i := range applied {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close(ctx)
			applied[i], err = migrations.Apply(ctx, conn)
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
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
	defer admin.Close(ctx)
	t.Cleanup(func() { admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") })
	for i := 0; i < 2; i++ { // the second call finds it
		if err := migrations.EnsureDatabase(ctx, dsn); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("database not created: %v", err)
	}
	conn.Close(ctx)
}
