package audit_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"smsgw/audit"
	"smsgw/internal/testenv"
	"smsgw/otp"
)

func partitions(t *testing.T, conn testenv.Querier) []string {
	t.Helper()
	return testenv.Strings(t, conn, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = 'audit_log' ORDER BY 1`)
}

func TestMaintainCreatesAheadAndDropsExpiredMonths(t *testing.T) {
	pool := testenv.Pool(t)
	ctx := context.Background()
	now := time.Date(2027, 3, 15, 12, 0, 0, 0, time.UTC)
	if _, err := audit.Maintain(ctx, pool, now, 2, 0); err != nil {
		t.Fatal(err)
	}
	got := partitions(t, pool)
	for _, want := range []string{"audit_log_202703", "audit_log_202704", "audit_log_202705", "audit_log_default"} {
		if !slices.Contains(got, want) {
			t.Fatalf("partitions %v lack %s", got, want)
		}
	}
	// Rows in old months, in a kept month, and one no partition covers.
	old := func(at time.Time) otp.AuditEvent { e := event(0); e.ID = newUUID(); e.Time = at; return e }
	if _, err := pool.Exec(ctx, `CREATE TABLE audit_log_202610 PARTITION OF audit_log FOR VALUES FROM ('2026-10-01T00:00:00Z') TO ('2026-11-01T00:00:00Z')`); err != nil {
		t.Fatal(err)
	}
	rows := []otp.AuditEvent{
		old(time.Date(2026, 10, 5, 0, 0, 0, 0, time.UTC)), // expired month
		old(time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)),  // kept
		old(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),  // default partition, expired
		old(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)),  // default partition, future
	}
	if err := audit.Write(ctx, pool, rows); err != nil {
		t.Fatalf("a row outside every monthly partition must still be stored: %v", err)
	}
	dropped, err := audit.Maintain(ctx, pool, now, 2, 90*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// Exactly the months that ended by the cutoff (2026-12-15) are gone,
	// whichever the migration created for the real current month.
	cutoff := now.Add(-90 * 24 * time.Hour)
	if !slices.Contains(dropped, "audit_log_202610") {
		t.Fatalf("dropped %v, want audit_log_202610 among them", dropped)
	}
	for _, name := range partitions(t, pool) {
		if name == "audit_log_default" {
			continue
		}
		from, _ := time.Parse("200601", name[len("audit_log_"):])
		if !from.AddDate(0, 1, 0).After(cutoff) {
			t.Fatalf("%s ended by the cutoff %v and was kept", name, cutoff)
		}
	}
	for _, name := range dropped {
		from, _ := time.Parse("200601", name[len("audit_log_"):])
		if from.AddDate(0, 1, 0).After(cutoff) {
			t.Fatalf("%s was dropped though its month reaches past the cutoff", name)
		}
	}
	if n := count(t, pool); n != 2 {
		t.Fatalf("%d rows left, want the kept one and the future one", n)
	}
	// Idempotent.
	if d, err := audit.Maintain(ctx, pool, now, 2, 90*24*time.Hour); err != nil || len(d) != 0 {
		t.Fatalf("second run: %v %v", d, err)
	}
}
