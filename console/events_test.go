package console_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"smsgw/api"
	"smsgw/audit"
	"smsgw/console"
	"smsgw/events"
	"smsgw/internal/app/apptest"
	"smsgw/internal/testenv"
	"smsgw/otp"
	"smsgw/verification"
)

// TestVerificationsAndFailedDeliveries: the phone page lists the number's
// verifications; the events page lists a delivery kept as failed, and its
// Retry button puts it back in the queue, whence it is delivered.
func TestVerificationsAndFailedDeliveries(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	pool := testenv.Pool(t)
	var up atomic.Bool
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !up.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(receiver.Close)
	// Retried for a nanosecond only: the first failure keeps it as failed.
	outbox := events.NewOutbox(pool, events.Options{Webhooks: []events.Webhook{{URL: receiver.URL, Key: []byte("0123456789abcdef")}},
		RetryFor: time.Nanosecond, Metrics: prometheus.NewRegistry()}, log)
	store := verification.New(pool, outbox, log)

	ph, err := otp.ParsePhone("+14155552671", "US")
	if err != nil {
		t.Fatal(err)
	}
	const id = "0199aaaa-0000-7000-8000-00000000c0de"
	now := time.Now().UTC()
	if err := store.Sent(ctx, otp.VerificationSend{ID: id, New: true, Phone: ph, APIKey: "signup", RequestID: "req-1",
		At: now, ExpiresAt: now.Add(10 * time.Minute), AttemptsLeft: 5}); err != nil {
		t.Fatal(err)
	}
	if n, err := outbox.DeliverDue(ctx); err != nil || n != 1 {
		t.Fatalf("delivered %d, %v", n, err)
	}

	svc := apptest.New(t, apptest.Options{})
	w, err := audit.NewWriter(pool, audit.Options{SpoolDir: t.TempDir(), Metrics: prometheus.NewRegistry()}, log)
	if err != nil {
		t.Fatal(err)
	}
	go w.Run(ctx)
	t.Cleanup(func() { w.Close(context.Background()) })
	con := console.New(log, console.Options{AdminToken: token, DefaultRegion: "US", MaxAttempts: 5,
		StatusOf: api.StatusOf},
		console.Deps{Support: svc.Service, AuditLog: w, Audit: audit.NewReader(pool), Verifications: store, Events: outbox})
	srv := httptest.NewServer(con)
	t.Cleanup(srv.Close)
	b := (&rig{URL: srv.URL}).browser(t)
	b.signIn(token)

	p := b.get("/console/phone?phone=" + url.QueryEscape("+1 415 555 2671"))
	if !strings.Contains(p.body, `<table id="verifications">`) || !strings.Contains(p.body, "<code>"+id+"</code></td><td>pending</td>") {
		t.Fatalf("phone page without the verification:\n%.4000s", p.body)
	}

	p = b.get("/console/events")
	if !strings.Contains(p.body, `<table id="failed-deliveries">`) || !strings.Contains(p.body, "verification.sent") ||
		!strings.Contains(p.body, "receiver answered 500") {
		t.Fatalf("events page without the failed delivery:\n%.4000s", p.body)
	}
	seq := regexpFind(t, p.body, `name="seq" value="(\d+)"`)
	up.Store(true)
	done := b.post("/console/events/retry", url.Values{"seq": {seq}, "csrf": {csrf(t, p)}})
	if !strings.Contains(done.body, "The delivery is back in the queue") || !strings.Contains(done.body, `id="no-failed"`) {
		t.Fatalf("after Retry:\n%.4000s", done.body)
	}
	if n, err := outbox.DeliverDue(ctx); err != nil || n != 1 {
		t.Fatalf("after Retry, delivered %d, %v", n, err)
	}
	if states := testenv.Strings(t, pool, `SELECT state FROM event_outbox`); len(states) != 1 || states[0] != "delivered" {
		t.Fatalf("outbox states %v", states)
	}
	requireAdminRows(t, pool, "console.events.get ok", "console.event.retry ok")
}
