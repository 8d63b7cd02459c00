package audit_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"smsgw/audit"
	"smsgw/internal/testenv"
	"smsgw/otp"
)

// proxied is a migrated database reached through a proxy the test can cut,
// as if Postgres went down, and a direct pool to count what arrived.
func proxied(t *testing.T) (through *pgxpool.Pool, direct *pgxpool.Pool, proxy *testenv.Proxy) {
	t.Helper()
	dsn := testenv.MigratedDatabase(t)
	u, _ := url.Parse(dsn)
	proxy = testenv.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	return testenv.PoolOn(t, u.String()), testenv.PoolOn(t, dsn), proxy
}

// newWriter makes a writer and runs it until the test ends, then closes it.
func newWriter(t *testing.T, pool *pgxpool.Pool, o audit.Options) *audit.Writer {
	t.Helper()
	w, err := audit.NewWriter(pool, o, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(context.Background()) })
	start(t, w)
	return w
}

// start runs w's loops until the returned stop (or the test's end), which
// waits for them.
func start(t *testing.T, w *audit.Writer) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func event(i int) otp.AuditEvent {
	return otp.AuditEvent{
		ID: uuid.Must(uuid.NewV7()).String(), Time: time.Now().UTC(), Kind: otp.KindSend, Outcome: otp.OutcomeSent,
		RequestID: fmt.Sprintf("req-%d", i), Phone: "+14155552671", ClientIP: netip.MustParseAddr("2001:db8::7"),
		Reason: "", Provider: "fake", MessageID: fmt.Sprintf("FAKE%d", i),
	}
}

// count is how many rows audit_log holds.
func count(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	return queryInt(t, pool, "SELECT count(*) FROM audit_log")
}

// queryInt runs a query whose answer is one integer.
func queryInt(t *testing.T, pool *pgxpool.Pool, query string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestWriteStoresEveryColumnExactlyOnce(t *testing.T) {
	pool := testenv.Pool(t)
	ctx := context.Background()
	full := event(1)
	full.APIKey = "web"
	bare := otp.AuditEvent{ID: uuid.Must(uuid.NewV7()).String(), Time: time.Now().UTC(), Kind: otp.KindSend, Outcome: otp.EInvalidPhone, RequestID: "req-2"}
	if err := audit.Write(ctx, pool, []otp.AuditEvent{full}); err != nil {
		t.Fatal(err)
	}
	// A retried batch overlapping what is stored skips what is there.
	if err := audit.Write(ctx, pool, []otp.AuditEvent{full, bare}); err != nil {
		t.Fatalf("writing an overlapping batch: %v", err)
	}
	if err := audit.Write(ctx, pool, []otp.AuditEvent{full, bare}); err != nil {
		t.Fatalf("writing a batch again: %v", err)
	}
	if n := count(t, pool); n != 2 {
		t.Fatalf("%d rows, want 2", n)
	}
	var phone, ip, provider, msgID, reason, key *string
	err := pool.QueryRow(ctx, `SELECT phone_e164, host(client_ip), provider, provider_message_id, reason, api_key FROM audit_log WHERE id = $1`, full.ID).
		Scan(&phone, &ip, &provider, &msgID, &reason, &key)
	if err != nil {
		t.Fatal(err)
	}
	if *phone != "+14155552671" || *ip != "2001:db8::7" || *provider != "fake" || *msgID != "FAKE1" || reason != nil || *key != "web" {
		t.Fatalf("row: %v %v %v %v %v %v", *phone, *ip, *provider, *msgID, reason, *key)
	}
	err = pool.QueryRow(ctx, `SELECT phone_e164, host(client_ip), provider FROM audit_log WHERE id = $1`, bare.ID).Scan(&phone, &ip, &provider)
	if err != nil {
		t.Fatal(err)
	}
	if phone != nil || ip != nil || provider != nil {
		t.Fatal("empty fields must be NULL")
	}
}

// TestSegmentsFromSendingToFinal: a send's segment count, known when its
// row is made durable as sending, stays through its final outcome, in both
// the cheap UPDATE and the upsert of a final whose first row is missing; a
// row without a text has NULL; the reader and the JSON carry it.
func TestSegmentsFromSendingToFinal(t *testing.T) {
	pool := testenv.Pool(t)
	w := newWriter(t, pool, audit.Options{SpoolDir: t.TempDir()})
	ctx := context.Background()
	sending := event(1)
	sending.Outcome, sending.Provider, sending.MessageID, sending.Segments = otp.OutcomeSending, "", "", 2
	if err := w.Record(ctx, sending); err != nil {
		t.Fatal(err)
	}
	final := event(1)
	final.ID, final.Time, final.Segments = sending.ID, sending.Time, 2
	w.Finish(final)
	// A final with no sending row before it (its first row still in a
	// spool elsewhere) is stored by the upsert.
	orphan := event(2)
	orphan.Segments = 3
	w.Finish(orphan)
	refused := event(3)
	refused.Outcome, refused.Provider, refused.MessageID = otp.ERateLimited, "", ""
	if err := w.Record(ctx, refused); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 0, "both finals written", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM audit_log WHERE outcome = 'sent'`) == 2
	})
	want := map[string]int{sending.ID: 2, orphan.ID: 3, refused.ID: 0}
	for id, n := range want {
		var got *int
		if err := pool.QueryRow(ctx, `SELECT segments FROM audit_log WHERE id = $1`, id).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if (n == 0) != (got == nil) || got != nil && *got != n {
			t.Errorf("row %s: segments %v, want %d (0: NULL)", id, got, n)
		}
	}
	events, err := audit.NewReader(pool).Recent(ctx, "+14155552671", 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if e.Segments != want[e.ID] {
			t.Errorf("read back %s: segments %d, want %d", e.ID, e.Segments, want[e.ID])
		}
		b, _ := e.MarshalJSON()
		var back otp.AuditEvent
		if err := back.UnmarshalJSON(b); err != nil || back.Segments != e.Segments {
			t.Errorf("JSON %s read back as %d segments (%v)", b, back.Segments, err)
		}
	}
}

// TestRecordIsDurableOnReturn: Record returns only when the row is in
// Postgres, and concurrent rows share writes.
func TestRecordIsDurableOnReturn(t *testing.T) {
	pool := testenv.Pool(t)
	// A write timeout no loaded machine reaches: every row must go to Postgres.
	w := newWriter(t, pool, audit.Options{BatchSize: 100, SpoolDir: t.TempDir(), WriteTimeout: time.Minute})
	const n = 2000
	testenv.Race(t, 20, func(g int) string {
		for i := 0; i < n/20; i++ {
			e := event(g*n + i)
			if err := w.Record(context.Background(), e); err != nil {
				t.Error(err)
				return ""
			}
			var found bool
			if err := pool.QueryRow(context.Background(), "SELECT EXISTS (SELECT 1 FROM audit_log WHERE id = $1)", e.ID).Scan(&found); err != nil || !found {
				t.Errorf("row %s not in Postgres when Record returned (%v)", e.ID, err)
				return ""
			}
		}
		return ""
	})
	if got := count(t, pool); got != n {
		t.Fatalf("%d rows, want %d", got, n)
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := w.Record(context.Background(), event(0)); err != audit.ErrClosed {
		t.Fatalf("Record after Close: %v", err)
	}
}

// TestPostgresOutageSpoolsAndReplays: with Postgres cut off, Record still
// returns promptly (rows fsynced to the spool); when Postgres is back the
// spool is replayed in full, once, and writing goes back to Postgres.
func TestPostgresOutageSpoolsAndReplays(t *testing.T) {
	through, direct, proxy := proxied(t)
	dir := t.TempDir()
	// A write timeout no loaded machine reaches while Postgres is up: once
	// the proxy is cut, writes fail at once rather than time out.
	reg := prometheus.NewRegistry()
	w := newWriter(t, through, audit.Options{SpoolDir: dir, WriteTimeout: 5 * time.Second, Metrics: reg})
	ctx := context.Background()
	if err := w.Record(ctx, event(0)); err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	testenv.Race(t, 10, func(g int) string {
		for i := 0; i < 30; i++ {
			if err := w.Record(ctx, event(1+g*30+i)); err != nil {
				t.Error(err)
			}
		}
		return ""
	})
	if n := count(t, direct); n != 1 {
		t.Fatalf("%d rows reached Postgres through a cut connection", n)
	}
	if w.Accepting() != nil {
		t.Fatal("a small spool refuses sends")
	}
	proxy.Heal()
	testenv.WaitFor(t, 0, "301 rows after Postgres came back", func() bool { return count(t, direct) == 301 })
	// The spool is gone and new rows go straight to Postgres again.
	testenv.WaitFor(t, 0, "the spool segments to go", func() bool { return spoolFiles(t, dir) == 0 })
	// The switch back to Postgres follows the last segment's removal.
	testenv.WaitFor(t, 0, "writing to Postgres again", func() bool { return testenv.Metric(t, reg, "smsgw_audit_spooling") == 0 })
	e := event(999)
	if err := w.Record(ctx, e); err != nil {
		t.Fatal(err)
	}
	var found bool
	direct.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM audit_log WHERE id = $1)", e.ID).Scan(&found)
	if !found {
		t.Fatal("after the replay, a row did not go to Postgres directly")
	}
}

// spoolFiles counts the segments of every replica's spool under dir.
func spoolFiles(t *testing.T, dir string) int {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "*", "spool-*.log"))
	return len(m)
}

// TestSpoolSurvivesARestart: rows spooled by one writer that never saw
// Postgres again are replayed by the next one, exactly once; a torn last
// line (a crash mid-write, never acknowledged) is skipped.
func TestSpoolSurvivesARestart(t *testing.T) {
	through, direct, proxy := proxied(t)
	dir := t.TempDir()
	proxy.Cut()
	first, err := audit.NewWriter(through, audit.Options{SpoolDir: dir, WriteTimeout: 50 * time.Millisecond}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	stopFirst := start(t, first)
	var ids []string
	for i := 0; i < 50; i++ {
		e := event(i)
		ids = append(ids, e.ID)
		if err := first.Record(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	stopFirst()
	first.Close(context.Background())
	// A crash in the middle of an append leaves a torn line.
	segs, _ := filepath.Glob(filepath.Join(dir, "replica-0", "spool-*.log"))
	f, err := os.OpenFile(segs[len(segs)-1], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`1234abcd {"id":"torn`)
	f.Close()

	proxy.Heal()
	newWriter(t, through, audit.Options{SpoolDir: dir})
	testenv.WaitFor(t, 0, "50 rows replayed after the restart", func() bool { return count(t, direct) >= 50 })
	testenv.WaitFor(t, 0, "the spool to empty", func() bool { return spoolFiles(t, dir) == 0 })
	if n := count(t, direct); n != 50 {
		t.Fatalf("%d rows, want exactly 50", n)
	}
	var n int
	direct.QueryRow(context.Background(), "SELECT count(*) FROM audit_log WHERE id = ANY($1)", ids).Scan(&n)
	if n != 50 {
		t.Fatalf("%d of the spooled ids stored", n)
	}
}

// TestFullSpoolFailsClosed: at the cap, Accepting refuses (sends stop) while
// the rows of the requests refused meanwhile still fit; past the hard cap
// Record fails and nothing is acknowledged that is not stored.
func TestFullSpoolFailsClosed(t *testing.T) {
	through, _, proxy := proxied(t)
	proxy.Cut()
	w := newWriter(t, through, audit.Options{SpoolDir: t.TempDir(), SpoolMaxBytes: 20 << 10, WriteTimeout: 20 * time.Millisecond})
	ctx := context.Background()
	i := 0
	for ; w.Accepting() == nil; i++ {
		if err := w.Record(ctx, event(i)); err != nil {
			t.Fatalf("row %d before the cap: %v", i, err)
		}
		if i > 10000 {
			t.Fatal("the spool never filled up")
		}
	}
	if w.Accepting() != audit.ErrSpoolFull {
		t.Fatalf("Accepting at the cap: %v", w.Accepting())
	}
	// The refusals' own rows still fit for a while...
	for j := 0; j < 10; j++ {
		if err := w.Record(ctx, event(i+j)); err != nil {
			t.Fatalf("refusal row %d: %v", j, err)
		}
	}
	// ...and past the hard cap Record fails rather than pretend.
	var err error
	for j := 0; err == nil && j < 100000; j++ {
		err = w.Record(ctx, event(j))
	}
	if err == nil {
		t.Fatal("Record never failed past the hard cap")
	}
}

func TestCloseWithoutSpoolGivesUpAtItsDeadline(t *testing.T) {
	through, _, proxy := proxied(t)
	reg := prometheus.NewRegistry()
	w, err := audit.NewWriter(through, audit.Options{WriteTimeout: 50 * time.Millisecond, Metrics: reg}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, w)
	proxy.Cut()
	go w.Record(context.Background(), event(1))
	testenv.WaitFor(t, 0, "a failed write", func() bool { return testenv.Metric(t, reg, "smsgw_audit_write_errors_total") >= 1 })
	stop() // the loops end; the row they could not write is Close's
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := w.Close(ctx); err == nil {
		t.Fatal("Close reported success with Postgres down and no spool")
	}
	// It gives up rather than hang (bounded loosely for a loaded machine).
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("Close took %v past a 500ms deadline", el)
	}
}

func newUUID() string { return uuid.Must(uuid.NewV7()).String() }
