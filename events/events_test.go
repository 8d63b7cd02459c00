package events_test

import (
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"smsgw/events"
	"smsgw/internal/testenv"
	"smsgw/otp"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// TestSignMatchesTheStandardWebhooksLibrary: what smsgw signs, the
// reference library verifies, and its signature is the same bytes.
func TestSignMatchesTheStandardWebhooksLibrary(t *testing.T) {
	key, err := events.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	body := []byte(`{"type":"verification.sent","timestamp":"2026-11-26T19:00:00Z","data":{}}`)
	sig := events.Sign(key, "evt_1", at, body)
	want, err := wh.Sign("evt_1", at, body)
	if err != nil || sig != want {
		t.Fatalf("Sign = %q, the library's %q (%v)", sig, want, err)
	}
	h := http.Header{}
	h.Set("webhook-id", "evt_1")
	h.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
	h.Set("webhook-signature", sig)
	if err := wh.Verify(body, h); err != nil {
		t.Fatalf("the library refuses smsgw's signature: %v", err)
	}
}

func TestParseSecretRefusesMalformedOnes(t *testing.T) {
	for _, s := range []string{"", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_not base64!", "whsec_" + base64.StdEncoding.EncodeToString([]byte("short"))} {
		if _, err := events.ParseSecret(s); err == nil {
			t.Errorf("ParseSecret(%q) accepted it", s)
		}
	}
}

// TestTwoReplicasDeliverEachEventOnce: two outboxes on one database (two
// replicas) claim side by side; each event reaches the receiver once,
// with a signature the library verifies.
func TestTwoReplicasDeliverEachEventOnce(t *testing.T) {
	ctx := context.Background()
	pool := testenv.Pool(t)
	wh, _ := standardwebhooks.NewWebhook(secret)
	key, _ := events.ParseSecret(secret)
	var mu sync.Mutex
	got := map[string]int{}
	bad := 0
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if wh.Verify(body, r.Header) != nil {
			bad++
		}
		got[r.Header.Get("webhook-id")]++
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(receiver.Close)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	opts := events.Options{Webhooks: []events.Webhook{{URL: receiver.URL, Key: key}}, Batch: 7, Parallel: 3}
	a, b := events.NewOutbox(pool, opts, log), events.NewOutbox(pool, opts, log)
	const n = 100
	var evs []events.Event
	for i := range n {
		evs = append(evs, events.New(events.VerificationSent, time.Now(), map[string]int{"i": i}))
	}
	if err := a.AddNow(ctx, evs...); err != nil {
		t.Fatal(err)
	}
	outcomes := testenv.Race(t, 2, func(i int) string {
		x := []*events.Outbox{a, b}[i]
		for {
			n, err := x.DeliverDue(ctx)
			if err != nil {
				return err.Error()
			}
			if n == 0 {
				return "done"
			}
		}
	})
	if outcomes["done"] != 2 {
		t.Fatalf("replicas: %v", outcomes)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != n || bad != 0 {
		t.Fatalf("%d distinct events of %d, %d badly signed", len(got), n, bad)
	}
	for id, c := range got {
		if c != 1 {
			t.Fatalf("event %s delivered %d times", id, c)
		}
	}
	backlog, err := a.Backlog(ctx)
	if err != nil || backlog.Pending != 0 || backlog.Failed != 0 {
		t.Fatalf("backlog %+v, %v", backlog, err)
	}
	// Delivered events are pruned after the retention, not before.
	if pruned, err := a.Prune(ctx, time.Now()); err != nil || pruned != 0 {
		t.Fatalf("pruned %d now, %v", pruned, err)
	}
	if pruned, err := a.Prune(ctx, time.Now().Add(73*time.Hour)); err != nil || pruned != n {
		t.Fatalf("pruned %d after the retention, %v", pruned, err)
	}
}

// TestFailedAttemptsBackOff: a receiver answering 500 leaves the event
// pending, due again only after the backoff.
func TestFailedAttemptsBackOff(t *testing.T) {
	ctx := context.Background()
	pool := testenv.Pool(t)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(receiver.Close)
	key, _ := events.ParseSecret(secret)
	x := events.NewOutbox(pool, events.Options{Webhooks: []events.Webhook{{URL: receiver.URL, Key: key}}, RetryBase: time.Hour},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := x.AddNow(ctx, events.New(events.VerificationApproved, time.Now(), nil)); err != nil {
		t.Fatal(err)
	}
	if n, err := x.DeliverDue(ctx); n != 1 || err != nil {
		t.Fatalf("first attempt: %d, %v", n, err)
	}
	if n, err := x.DeliverDue(ctx); n != 0 || err != nil {
		t.Fatalf("an attempt within the backoff: %d, %v", n, err)
	}
	backlog, err := x.Backlog(ctx)
	if err != nil || backlog.Pending != 1 || backlog.Failed != 0 {
		t.Fatalf("backlog %+v, %v", backlog, err)
	}
	states := testenv.Strings(t, pool, `SELECT last_error || ' ' || attempts FROM event_outbox`)
	if len(states) != 1 || states[0] != "receiver answered 500 1" {
		t.Fatalf("outbox %v", states)
	}
}

// TestPumpingChangesToldOnce: a hold becoming held is pumping.restricted,
// its end pumping.lifted, each once however many replicas look.
func TestPumpingChangesToldOnce(t *testing.T) {
	ctx := context.Background()
	pool := testenv.Pool(t)
	key, _ := events.ParseSecret(secret)
	opts := events.Options{Webhooks: []events.Webhook{{URL: "http://127.0.0.1:1/hook", Key: key, Types: []string{events.PumpingRestricted, events.PumpingLifted}}}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, b := events.NewOutbox(pool, opts, log), events.NewOutbox(pool, opts, log)
	held := []otp.PumpingHold{{Rule: "range", Subject: "+3712000", Used: 12, Limit: 10}}
	now := time.Now()
	outcomes := testenv.Race(t, 4, func(i int) string {
		if err := []*events.Outbox{a, b}[i%2].SyncPumping(ctx, held, now); err != nil {
			return err.Error()
		}
		return "ok"
	})
	if outcomes["ok"] != 4 {
		t.Fatalf("syncs: %v", outcomes)
	}
	if err := b.SyncPumping(ctx, nil, now); err != nil {
		t.Fatal(err)
	}
	if err := a.SyncPumping(ctx, nil, now); err != nil {
		t.Fatal(err)
	}
	got := testenv.Strings(t, pool, `SELECT type || ' ' || (payload->'data'->>'rule') || ' ' || (payload->'data'->>'subject') FROM event_outbox ORDER BY seq`)
	if len(got) != 2 || got[0] != "pumping.restricted range +3712000" || got[1] != "pumping.lifted range +3712000" {
		t.Fatalf("outbox %v", got)
	}
}

// TestAddWritesEachEventForEachWebhookThatWantsIt: one row per event and
// webhook taking its type, written once however often it is added.
func TestAddWritesEachEventForEachWebhookThatWantsIt(t *testing.T) {
	ctx := context.Background()
	pool := testenv.Pool(t)
	key, _ := events.ParseSecret(secret)
	x := events.NewOutbox(pool, events.Options{Webhooks: []events.Webhook{{URL: "http://127.0.0.1:1/all", Key: key},
		{URL: "http://127.0.0.1:1/approved", Key: key, Types: []string{events.VerificationApproved}}}},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	at := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	evs := []events.Event{events.New(events.VerificationSent, at, map[string]int{"i": 1}),
		events.New(events.VerificationApproved, at, map[string]int{"i": 2}), events.New(events.VerificationSent, at, nil)}
	for range 2 {
		if err := x.AddNow(ctx, evs...); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.AddNow(ctx); err != nil {
		t.Fatal(err)
	}
	got := testenv.Strings(t, pool, `SELECT type || ' ' || substr(webhook, 19) || ' ' || payload::text || ' ' || state || ' '
		|| (created_at = $1 AND next_attempt_at = $1 AND retry_until = $1 + interval '24h')
		FROM event_outbox ORDER BY seq`, at)
	want := []string{
		`verification.sent /all {"data": {"i": 1}, "type": "verification.sent", "timestamp": "2026-11-27T03:00:00Z"} pending true`,
		`verification.approved /all {"data": {"i": 2}, "type": "verification.approved", "timestamp": "2026-11-27T03:00:00Z"} pending true`,
		`verification.approved /approved {"data": {"i": 2}, "type": "verification.approved", "timestamp": "2026-11-27T03:00:00Z"} pending true`,
		`verification.sent /all {"data": null, "type": "verification.sent", "timestamp": "2026-11-27T03:00:00Z"} pending true`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("outbox\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestSyncPumpingSeveralHolds: holds synced in one statement each way; one
// pumping.restricted per new hold in the order of held (a hold listed twice
// told once), with its since and why; nothing for a hold already told; one
// pumping.lifted per hold gone, by rule and subject.
func TestSyncPumpingSeveralHolds(t *testing.T) {
	ctx := context.Background()
	pool := testenv.Pool(t)
	key, _ := events.ParseSecret(secret)
	x := events.NewOutbox(pool, events.Options{Webhooks: []events.Webhook{{URL: "http://127.0.0.1:1/hook", Key: key}}},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	now := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	since := now.Add(-time.Hour)
	held := []otp.PumpingHold{
		{Rule: "range", Subject: "+3712000", Used: 12, Limit: 10},
		{Rule: "country", Subject: "LV", Restricted: &otp.CountryRestriction{Since: since, Abroad: true, Unverified: 40, Budget: 30}},
		{Rule: "range", Subject: "+3712000", Used: 13, Limit: 10},
		{Rule: "operator", Subject: "LV/Bite", Used: 50, Limit: 20},
	}
	if err := x.SyncPumping(ctx, held[:2], now); err != nil {
		t.Fatal(err)
	}
	if err := x.SyncPumping(ctx, held, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := x.SyncPumping(ctx, held[1:2], now.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	got := testenv.Strings(t, pool, `SELECT type || ' ' || (payload->'data'->>'rule') || ' ' || (payload->'data'->>'subject') || ' '
		|| (payload->'data'->>'since') || ' ' || (payload->'data'->>'why') || ' @' || (payload->>'timestamp') FROM event_outbox ORDER BY seq`)
	want := []string{
		"pumping.restricted range +3712000 2026-11-27T03:00:00Z 12 sends with no sign of a real user, over its budget of 10 @2026-11-27T03:00:00Z",
		"pumping.restricted country LV 2026-11-27T02:00:00Z 40 unverified texts over the 30 its country earned (only sends from networks known abroad) @2026-11-27T03:00:00Z",
		"pumping.restricted operator LV/Bite 2026-11-27T03:01:00Z 50 sends with no sign of a real user, over its budget of 20 @2026-11-27T03:01:00Z",
		"pumping.lifted operator LV/Bite 2026-11-27T03:01:00Z lifted: 50 sends with no sign of a real user, over its budget of 20 @2026-11-27T03:02:00Z",
		"pumping.lifted range +3712000 2026-11-27T03:00:00Z lifted: 12 sends with no sign of a real user, over its budget of 10 @2026-11-27T03:02:00Z",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("outbox\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if states := testenv.Strings(t, pool, `SELECT rule || ' ' || subject FROM pumping_states`); len(states) != 1 || states[0] != "country LV" {
		t.Fatalf("pumping_states %v", states)
	}
}
