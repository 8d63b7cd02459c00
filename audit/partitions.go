package audit

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// maintenanceLock keeps replicas from maintaining partitions at once.
const maintenanceLock = 0x736d7368 // "smsh"

// Maintain creates the monthly partitions of audit_log for this month and
// the next ahead months, and drops those whose whole month lies before the
// retention cutoff (and default-partition rows older than it). It returns
// what it dropped. Replicas may all call it; one does the work.
func Maintain(ctx context.Context, pool *pgxpool.Pool, now time.Time, ahead int, retention time.Duration) (dropped []string, err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	var got bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", maintenanceLock).Scan(&got); err != nil || !got {
		return nil, err
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", maintenanceLock)

	month := time.Date(now.UTC().Year(), now.UTC().Month(), 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i <= ahead; i++ {
		from := month.AddDate(0, i, 0)
		name := partitionName(from)
		_, err := conn.Exec(ctx, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s PARTITION OF audit_log FOR VALUES FROM ('%s') TO ('%s')`,
			pgx.Identifier{name}.Sanitize(), from.Format(time.RFC3339), from.AddDate(0, 1, 0).Format(time.RFC3339)))
		if err != nil {
			return dropped, fmt.Errorf("audit: create partition %s: %w", name, err)
		}
	}
	if err := follow(ctx, conn); err != nil {
		return dropped, err
	}
	if retention <= 0 {
		return dropped, nil
	}
	cutoff := now.Add(-retention)
	rows, err := conn.Query(ctx, `SELECT c.relname FROM pg_inherits i
		JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
		WHERE p.relname = 'audit_log'`)
	if err != nil {
		return dropped, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return dropped, err
	}
	for _, name := range names {
		from, ok := partitionMonth(name)
		if !ok || from.AddDate(0, 1, 0).After(cutoff) {
			continue // some of its month is still within retention
		}
		if _, err := conn.Exec(ctx, "DROP TABLE "+pgx.Identifier{name}.Sanitize()); err != nil {
			return dropped, fmt.Errorf("audit: drop partition %s: %w", name, err)
		}
		dropped = append(dropped, name)
	}
	for _, table := range []string{"audit_log_default", "audit_message_ids_default"} {
		if _, err := conn.Exec(ctx, "DELETE FROM "+table+" WHERE created_at < $1", cutoff); err != nil {
			return dropped, fmt.Errorf("audit: retention of %s: %w", table, err)
		}
	}
	return dropped, follow(ctx, conn)
}

// follow gives audit_message_ids a partition for each of audit_log's and
// drops the others, and gives audit_log's partitions their fillfactor
// (migration 006).
func follow(ctx context.Context, conn *pgxpool.Conn) error {
	if _, err := conn.Exec(ctx, "SELECT smsgw_audit_partitions_follow()"); err != nil {
		return fmt.Errorf("audit: partitions of audit_message_ids: %w", err)
	}
	return nil
}

func partitionName(month time.Time) string { return "audit_log_" + month.Format("200601") }

// partitionMonth reads the month a partition's name stands for.
func partitionMonth(name string) (time.Time, bool) {
	s, ok := strings.CutPrefix(name, "audit_log_")
	if !ok || len(s) != 6 {
		return time.Time{}, false
	}
	t, err := time.Parse("200601", s)
	return t, err == nil
}
