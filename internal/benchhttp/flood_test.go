package benchhttp

import (
	"context"
	"errors"
	"fmt"

	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"smsgw/internal/testenv"
)

// BenchmarkFlood floods the built binary (shipped defaults, one replica)
// with requests that text nobody, shape after shape, wrk as its own process,
// and prints what each shape costs the audit store per hour, WAL included,
// and whether every answer was counted (SPEC "Audit": sum(count) equals the
// requests answered).
//
//	make bench-flood                         # 30 s per shape
//	SMSGW_FLOOD_ATTACK=60s make bench-flood
//
// The table is the partitions of audit_log with their indexes
// (pg_total_relation_size); the WAL is the records that touch the
// benchmark's database (pg_walinspect, so other databases on a shared
// server do not count), plus its commit records. Each shape starts after a
// CHECKPOINT, so the pages it touches first are written whole into the WAL,
// as they are after every checkpoint in production; a run shorter than a
// minute overstates rollups (a new one each minute), so the figures are an
// upper bound. The partition is filled past its BRIN index's first block
// range first (pastFirstBlockRange), as a month's partition is in service.
func BenchmarkFlood(b *testing.B) {
	attack := envDuration(b, "SMSGW_FLOOD_ATTACK", 30*time.Second)
	conns := envInt(b, "SMSGW_BENCH_CONNECTIONS", 64)
	_, prefix := testenv.Redis(b)
	pool := testenv.Pool(b)
	dsn := pool.Config().ConnString()
	if _, err := pool.Exec(context.Background(), "CREATE EXTENSION IF NOT EXISTS pg_walinspect"); err != nil {
		b.Fatalf("pg_walinspect (PostgreSQL 15 contrib) is needed to tell this database's WAL apart: %v", err)
	}
	url := startSmsgw(b, prefix+"smsgw:", dsn, "")
	pastFirstBlockRange(b, pool)
	script, err := filepath.Abs("send.lua")
	if err != nil {
		b.Fatal(err)
	}
	shapes := []struct{ name, lua, what string }{
		{"one-client", "hot", "one client, one phone"},
		{"bad-numbers", "bad-numbers", "a new address per request, numbers that do not parse"},
		{"pumped-block", "pumped-block", "a new address per request, one pumped Latvian block of 100"},
	}
	type row struct {
		name                   string
		rate                   float64
		codes                  map[int]int
		tableMB, walMB, mbHour float64
		rows                   int64
		answered, counted      int64
	}
	var out []row
	for b.Loop() {
		for i, sh := range shapes {
			ctx := context.Background()
			if _, err := pool.Exec(ctx, "CHECKPOINT"); err != nil {
				b.Fatal(err)
			}
			// A replication slot keeps the shape's WAL until it is read.
			slot := fmt.Sprintf("smsgw_bench_flood_%d", time.Now().UnixNano())
			if _, err := pool.Exec(ctx, "SELECT pg_create_physical_replication_slot($1, true)", slot); err != nil {
				b.Fatal(err)
			}
			dropSlot := func() { pool.Exec(context.Background(), "SELECT pg_drop_replication_slot($1)", slot) }
			b.Cleanup(dropSlot)
			before := measure(b, pool)
			start := time.Now()
			r := runWrk(b, script, scenario{name: sh.name, url: url, path: "/v1/otp/send", mode: sh.lua}, (i+1)*4_000_000, attack, conns, "")
			// Per hour of attack: what is written after wrk stops (the last
			// rollups, rows queued) is the attack's.
			elapsed := time.Since(start).Seconds()
			var answered int64
			for _, n := range r.codes {
				answered += int64(n)
			}
			// What wrk had in flight when it stopped may have been answered
			// and counted too; wait until every answer is counted and the
			// spool is empty.
			after := settle(b, pool, url, before.sum+answered)
			wal := walBytes(b, pool, before, after)
			dropSlot()
			table := float64(after.table - before.table)
			out = append(out, row{name: sh.name, rate: r.rate, codes: r.codes,
				tableMB: table / 1e6, walMB: wal / 1e6, mbHour: (table + wal) / elapsed * 3600 / 1e6,
				rows: after.rows - before.rows, answered: answered, counted: after.sum - before.sum})
			b.Logf("%s (%s): %.0f req/s, answers %v", sh.name, sh.what, r.rate, r.codes)
		}
	}
	b.Logf("wrk -t2 -c%d, %s per shape, one replica, shipped defaults; audit store growth (table+indexes, WAL):", conns, attack)
	b.Logf("%-13s %9s %9s %9s %9s %10s %9s %11s %11s", "shape", "req/s", "rows", "table MB", "WAL MB", "MB/hour", "B/row", "answered", "sum(count)")
	for _, r := range out {
		perRow := 0.0
		if r.rows > 0 {
			perRow = (r.tableMB + r.walMB) * 1e6 / float64(r.rows)
		}
		b.Logf("%-13s %9.0f %9d %9.2f %9.2f %10.1f %9.0f %11d %11d", r.name, r.rate, r.rows, r.tableMB, r.walMB, r.mbHour, perRow, r.answered, r.counted)
		b.ReportMetric(r.mbHour, r.name+"-MB/hour")
	}
}

// pastFirstBlockRange fills this month's partition of audit_log past its
// BRIN index's first block range (128 pages, 1 MB of rows), as a month's
// partition is minutes after the month begins. A BRIN index built on an
// empty partition summarizes that first range, so each row written into it
// also rewrites the range's summary in the WAL (a BRIN update, ~70 bytes a
// row, 10% of a refusal row); past it, ranges stay unsummarized until a
// VACUUM and rows cost no BRIN WAL. A fresh test database would otherwise
// price every row at the cost of a month's first 3,000. The filler rows are
// there before the first footprint, so no shape counts them.
func pastFirstBlockRange(b *testing.B, pool *pgxpool.Pool) {
	b.Helper()
	ctx := context.Background()
	const firstRange = 128 * 8192
	for range 100 {
		var size int64
		err := pool.QueryRow(ctx, `SELECT pg_relation_size(tableoid) FROM audit_log
			WHERE created_at >= date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AND request_id = 'bench-fill' LIMIT 1`).Scan(&size)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			b.Fatal(err)
		}
		if size > firstRange {
			return
		}
		if _, err := pool.Exec(ctx, `INSERT INTO audit_log (id, created_at, kind, outcome, request_id, reason, subject, count)
			SELECT gen_random_uuid(), now(), 'send', 'invalid_request', 'bench-fill', 'invalid_phone', 'bench-fill', 1
			FROM generate_series(1, 2000)`); err != nil {
			b.Fatal(err)
		}
	}
	b.Fatal("this month's partition of audit_log did not grow past 1 MB")
}

// footprint is the audit store at one moment.
type footprint struct {
	table, rows, sum, commits int64
	lsn                       string
	db                        uint32
}

func measure(b *testing.B, pool *pgxpool.Pool) footprint {
	b.Helper()
	var f footprint
	err := pool.QueryRow(context.Background(), `SELECT
		(SELECT coalesce(sum(pg_total_relation_size(inhrelid)), 0) FROM pg_inherits WHERE inhparent = 'audit_log'::regclass),
		(SELECT count(*) FROM audit_log), (SELECT coalesce(sum(count), 0) FROM audit_log),
		(SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()),
		pg_current_wal_lsn()::text, (SELECT oid FROM pg_database WHERE datname = current_database())`).
		Scan(&f.table, &f.rows, &f.sum, &f.commits, &f.lsn, &f.db)
	if err != nil {
		b.Fatal(err)
	}
	return f
}

// settle waits until sum(count) reaches want (or stops growing for 5 s:
// wrk's last requests may never have been answered) and nothing is spooled.
func settle(b *testing.B, pool *pgxpool.Pool, url string, want int64) footprint {
	b.Helper()
	last, since := int64(-1), time.Now()
	for {
		f := measure(b, pool)
		if f.sum >= want && spoolEmpty(url) || time.Since(since) > 5*time.Second {
			time.Sleep(2 * time.Second) // a rollup flush under way lands
			return measure(b, pool)
		}
		if f.sum != last {
			last, since = f.sum, time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var spoolBytesRE = regexp.MustCompile(`(?m)^smsgw_audit_spool_bytes (\S+)$`)

func spoolEmpty(url string) bool {
	res, err := http.Get(url + "/metrics")
	if err != nil {
		return false
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	m := spoolBytesRE.FindSubmatch(body)
	return m != nil && string(m[1]) == "0"
}

// walBytes is the WAL written between two footprints for the benchmark's
// database: the records whose blocks are in it, and its commits at the
// window's average commit record size.
func walBytes(b *testing.B, pool *pgxpool.Pool, from, to footprint) float64 {
	b.Helper()
	var blocks, commit float64
	err := pool.QueryRow(context.Background(), `SELECT
		coalesce(sum(record_length) FILTER (WHERE block_ref ~ $3), 0),
		coalesce(avg(record_length) FILTER (WHERE resource_manager = 'Transaction' AND record_type = 'COMMIT'), 0)
		FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn)`,
		from.lsn, to.lsn, `rel [0-9]+/`+strconv.FormatUint(uint64(from.db), 10)+`/`).Scan(&blocks, &commit)
	if err != nil {
		b.Fatalf("WAL between %s and %s: %v", from.lsn, to.lsn, err)
	}
	return blocks + commit*float64(to.commits-from.commits)
}
