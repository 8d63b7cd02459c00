package audit_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"smsgw/audit"
	"smsgw/internal/testenv"
	"smsgw/migrations"
	"smsgw/otp"
)

// newDatabase returns a migrated database of the test's own.
func newDatabase(t *testing.T) string {
	t.Helper()
	dsn := testenv.Database(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := migrations.Apply(ctx, conn); err != nil {
		t.Fatal(err)
	}
	return dsn
}

func newPool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func event(i int) otp.AuditEvent {
	return otp.AuditEvent{
		ID: uuid.Must(uuid.NewV7()).String(), Time: time.Now().UTC(), Kind: otp.KindSend, Outcome: otp.OutcomeSent,
		RequestID: fmt.Sprintf("req-%d", i), Phone: "+14155552671", ClientIP: netip.MustParseAddr("2001:db8::7"),
		Reason: "", Provider: "fake", MessageID: fmt.Sprintf("FAKE%d", i),
	}
}

func count(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM audit_log").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestWriteStoresEveryColumnExactlyOnce(t *testing.T) {
	pool := newPool(t, newDatabase(t))
	ctx := context.Background()
	full := event(1)
	bare := otp.AuditEvent{ID: uuid.Must(uuid.NewV7()).String(), Time: time.Now().UTC(), Kind: otp.KindSend, Outcome: otp.EInvalidPhone, RequestID: "req-2"}
	if err := audit.Write(ctx, pool, []otp.AuditEvent{full}); err != nil {
		t.Fatal(err)
	}
	// A retried batch overlapping what is stored: COPY fails on the
	// duplicate and the batch is rewritten, skipping it.
	if err := audit.Write(ctx, pool, []otp.AuditEvent{full, bare}); err != nil {
		t.Fatalf("writing an overlapping batch: %v", err)
	}
	if err := audit.Insert(ctx, pool, []otp.AuditEvent{full, bare}); err != nil {
		t.Fatalf("inserting a batch again: %v", err)
	}
	if n := count(t, pool); n != 2 {
		t.Fatalf("%d rows, want 2", n)
	}
	var phone, ip, provider, msgID, reason *string
	err := pool.QueryRow(ctx, `SELECT phone_e164, host(client_ip), provider, provider_message_id, reason FROM audit_log WHERE id = $1`, full.ID).
		Scan(&phone, &ip, &provider, &msgID, &reason)
	if err != nil {
		t.Fatal(err)
	}
	if *phone != "+14155552671" || *ip != "2001:db8::7" || *provider != "fake" || *msgID != "FAKE1" || reason != nil {
		t.Fatalf("row: %v %v %v %v %v", *phone, *ip, *provider, *msgID, reason)
	}
	err = pool.QueryRow(ctx, `SELECT phone_e164, host(client_ip), provider FROM audit_log WHERE id = $1`, bare.ID).Scan(&phone, &ip, &provider)
	if err != nil {
		t.Fatal(err)
	}
	if phone != nil || ip != nil || provider != nil {
		t.Fatal("empty fields must be NULL")
	}
}

func TestWriterFlushesEveryRowOnClose(t *testing.T) {
	pool := newPool(t, newDatabase(t))
	w := audit.NewWriter(pool, audit.Options{BatchSize: 100}, quiet)
	const n = 5000
	var wg sync.WaitGroup
	for g := 0; g < 10; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n/10; i++ {
				if err := w.Record(context.Background(), event(g*n+i)); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := count(t, pool); got != n {
		t.Fatalf("%d rows after Close, want %d", got, n)
	}
	if err := w.Record(context.Background(), event(0)); err != audit.ErrClosed {
		t.Fatalf("Record after Close: %v", err)
	}
}

func TestWriterKeepsRowsWhilePostgresIsDown(t *testing.T) {
	dsn := newDatabase(t)
	u, _ := url.Parse(dsn)
	proxy := testenv.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	pool := newPool(t, u.String())
	w := audit.NewWriter(pool, audit.Options{}, quiet)

	direct := newPool(t, dsn)
	proxy.Cut()
	for i := 0; i < 50; i++ {
		if err := w.Record(context.Background(), event(i)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond) // a few failed attempts
	if n := count(t, direct); n != 0 {
		t.Fatalf("%d rows written through a cut connection", n)
	}
	proxy.Heal()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(t, direct); n != 50 {
		t.Fatalf("%d rows after Postgres came back, want 50", n)
	}
}

func TestCloseGivesUpAtItsDeadline(t *testing.T) {
	dsn := newDatabase(t)
	u, _ := url.Parse(dsn)
	proxy := testenv.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	w := audit.NewWriter(newPool(t, u.String()), audit.Options{}, quiet)
	proxy.Cut()
	if err := w.Record(context.Background(), event(1)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := w.Close(ctx); err == nil {
		t.Fatal("Close reported success with Postgres down")
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("Close took %v past a 500ms deadline", el)
	}
}
