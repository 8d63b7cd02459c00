package events_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"smsgw/events"
	"smsgw/internal/testenv"
)

// hook is a receiver that counts what it is sent and answers 500 while down.
type hook struct {
	*httptest.Server
	down atomic.Bool
	mu   sync.Mutex
	hits int            // every request
	ok   map[string]int // webhook-id → 2xx answers
}

func newHook(t *testing.T) *hook {
	h := &hook{ok: map[string]int{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.hits++
		if h.down.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		h.ok[r.Header.Get("webhook-id")]++
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hook) counts() (hits, delivered int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hits, len(h.ok)
}

// clock is the circuits' time, moved by the test.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func addEvents(t *testing.T, x *events.Outbox, n int) {
	t.Helper()
	var evs []events.Event
	for i := range n {
		evs = append(evs, events.New(events.VerificationSent, time.Now(), map[string]int{"i": i}))
	}
	if err := x.AddNow(context.Background(), evs...); err != nil {
		t.Fatal(err)
	}
}

func deliverDue(t *testing.T, x *events.Outbox, want int, what string) {
	t.Helper()
	if n, err := x.DeliverDue(context.Background()); n != want || err != nil {
		t.Fatalf("%s: claimed %d, want %d (%v)", what, n, want, err)
	}
}

// TestCircuitHoldsBackADeadReceiver: after a failed attempt none of the
// webhook's rows is claimed until its backoff ends, then one probe per
// backoff; the rows stay pending and unattempted; another webhook's
// deliveries go on meanwhile; a probe answered 2xx resumes delivery.
func TestCircuitHoldsBackADeadReceiver(t *testing.T) {
	pool := testenv.Pool(t)
	dead, live := newHook(t), newHook(t)
	dead.down.Store(true)
	key, _ := events.ParseSecret(secret)
	reg := prometheus.NewRegistry()
	// Parallel 1: the rows of a batch go one after the other, so the ones
	// after the first failure find the circuit open. RetryBase 1h: a row
	// attempted is not due again within the test.
	x := events.NewOutbox(pool, events.Options{Webhooks: []events.Webhook{{URL: dead.URL + "/hook?token=t0ps3cret", Key: key}, {URL: live.URL, Key: key}},
		RetryBase: time.Hour, Parallel: 1, Metrics: reg}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	clk := &clock{now: time.Now()}
	events.SetCircuitClock(x, clk.Now)
	label := dead.URL + "/hook" // the metrics' name for it: no query
	metric := func(name string) float64 { return testenv.Metric(t, reg, name, label) }
	if metric("smsgw_events_circuit_open") != 0 || metric("smsgw_events_circuit_opened_total") != 0 {
		t.Fatal("a circuit open before any attempt")
	}

	addEvents(t, x, 5)
	deliverDue(t, x, 10, "the first claim")
	if hits, _ := dead.counts(); hits != 1 {
		t.Fatalf("the dead receiver was sent %d requests, want 1 (the others put back)", hits)
	}
	if _, got := live.counts(); got != 5 {
		t.Fatalf("the live receiver got %d events, want 5", got)
	}
	// One row attempted; the four others pending, unattempted, due.
	rows := testenv.Strings(t, pool, `SELECT state || ' ' || attempts || ' ' || (next_attempt_at <= now())
		FROM event_outbox WHERE webhook LIKE $1 ORDER BY attempts, seq`, dead.URL+"%")
	if strings.Join(rows, ",") != "pending 0 true,pending 0 true,pending 0 true,pending 0 true,pending 1 false" {
		t.Fatalf("the dead webhook's rows: %v", rows)
	}
	if metric("smsgw_events_circuit_open") != 1 || metric("smsgw_events_circuit_opened_total") != 1 {
		t.Fatalf("circuit_open %v, opened_total %v", metric("smsgw_events_circuit_open"), metric("smsgw_events_circuit_opened_total"))
	}

	// While it is open, new events reach the live receiver only.
	addEvents(t, x, 3)
	deliverDue(t, x, 3, "a claim with the circuit open")
	clk.Add(40 * time.Minute)
	deliverDue(t, x, 0, "within the backoff")
	if hits, _ := dead.counts(); hits != 1 {
		t.Fatalf("the dead receiver was sent %d requests while its circuit was open", hits)
	}

	// After the backoff: one probe, which fails and opens it again.
	clk.Add(21 * time.Minute)
	deliverDue(t, x, 1, "the probe")
	deliverDue(t, x, 0, "after a failed probe")
	if hits, _ := dead.counts(); hits != 2 {
		t.Fatalf("the dead receiver was sent %d requests, want 2", hits)
	}
	if metric("smsgw_events_circuit_open") != 1 || metric("smsgw_events_circuit_opened_total") != 1 {
		t.Fatal("a failed probe is not a new opening")
	}

	// The receiver recovers: the next probe closes the circuit and the
	// rows go in full batches.
	dead.down.Store(false)
	clk.Add(time.Hour)
	deliverDue(t, x, 1, "the probe after the receiver recovered")
	if metric("smsgw_events_circuit_open") != 0 {
		t.Fatal("the circuit is still open after a 2xx")
	}
	deliverDue(t, x, 5, "the held-back rows")
	// The two rows whose attempts failed wait for their own backoff.
	if _, err := pool.Exec(context.Background(), `UPDATE event_outbox SET next_attempt_at = now() WHERE state = 'pending'`); err != nil {
		t.Fatal(err)
	}
	deliverDue(t, x, 2, "the rows that failed, at their next attempt")
	if hits, got := dead.counts(); got != 8 || hits != 10 {
		t.Fatalf("the receiver got %d events in %d requests, want 8 in 10", got, hits)
	}
	if _, got := live.counts(); got != 8 {
		t.Fatalf("the live receiver got %d events, want 8", got)
	}
	if f := testenv.Metric(t, reg, "smsgw_events_attempts_failed_total", events.VerificationSent); f != 2 {
		t.Fatalf("attempts_failed_total %v, want 2", f)
	}
	backlog, err := x.Backlog(context.Background())
	if err != nil || backlog.Pending != 0 || backlog.Failed != 0 {
		t.Fatalf("backlog %+v, %v", backlog, err)
	}
}

// TestRowsOutlivingRetryForUnattemptedAreFailed: rows held back by an open
// circuit past their retry_until are kept as failed by the maintenance, and
// so are those of a webhook no longer configured; a closed circuit's rows
// and rows still inside their window are left to their attempts.
func TestRowsOutlivingRetryForUnattemptedAreFailed(t *testing.T) {
	ctx := context.Background()
	pool := testenv.Pool(t)
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close() // connections refused
	live := newHook(t)
	key, _ := events.ParseSecret(secret)
	reg := prometheus.NewRegistry()
	x := events.NewOutbox(pool, events.Options{Webhooks: []events.Webhook{{URL: gone.URL, Key: key}, {URL: live.URL, Key: key, Types: []string{events.VerificationApproved}}},
		RetryBase: time.Hour, Parallel: 1, Metrics: reg}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	addEvents(t, x, 3)
	deliverDue(t, x, 3, "the first claim")
	if _, err := pool.Exec(ctx, `
		INSERT INTO event_outbox (event_id, webhook, type, payload, created_at, next_attempt_at, retry_until) VALUES
		('evt_old', 'http://removed.example/hook', 'verification.sent', '{}', now() - interval '25h', now() - interval '25h', now() - interval '1h'),
		('evt_new', 'http://removed.example/hook', 'verification.sent', '{}', now(), now(), now() + interval '1h'),
		('evt_live', $1, 'verification.approved', '{}', now() - interval '25h', now() + interval '1h', now() - interval '1h')`, live.URL); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE event_outbox SET retry_until = now() - interval '1s' WHERE webhook = $1`, gone.URL); err != nil {
		t.Fatal(err)
	}
	n, err := events.FailUnattempted(ctx, x)
	if err != nil || n != 3 {
		t.Fatalf("failed %d, want 3 (%v)", n, err)
	}
	got := testenv.Strings(t, pool, `SELECT event_id || ' ' || state || ' ' || attempts || ' ' || split_part(last_error, ':', 1)
		FROM event_outbox WHERE webhook <> $1 ORDER BY state, event_id`, gone.URL)
	want := []string{"evt_old failed 0 webhook not configured", "evt_live pending 0 ", "evt_new pending 0 "}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("rows\n%q\nwant\n%q", got, want)
	}
	// The one attempted row waits for its own next attempt.
	got = testenv.Strings(t, pool, `SELECT state || ' ' || attempts || ' ' || left(last_error, 12)
		|| ' ' || (last_error LIKE '%connection refused')
		FROM event_outbox WHERE webhook = $1 ORDER BY attempts, seq`, gone.URL)
	want = []string{"failed 0 not attempte true", "failed 0 not attempte true", "pending 1 Post \"http:/ true"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("rows\n%q\nwant\n%q", got, want)
	}
	if f := testenv.Metric(t, reg, "smsgw_events_failed_total", events.VerificationSent); f != 3 {
		t.Fatalf("failed_total %v, want 3", f)
	}
}
