package verification_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"smsgw/events"
	"smsgw/otp"
)

// TestSendsSharingAGroup races sends into the group commit: first texts
// of many verifications and resends of a few (so one group can hold the
// same verification twice), some whose receipt came before their record.
// Every record, every sends count, every event and every early receipt
// must come out as if each send had a transaction of its own.
func TestSendsSharingAGroup(t *testing.T) {
	ctx := context.Background()
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(receiver.Close)
	store, pool, ph := newStore(t, events.Webhook{URL: receiver.URL, Key: []byte("0123456789abcdef")})

	const verifications, resent, resends = 200, 10, 4
	id := func(i int) string { return fmt.Sprintf("0199aaaa-0000-7000-8000-%012d", i) }
	msg := func(i, n int) string { return fmt.Sprintf("SM-%d-%d", i, n) }
	// Every fifth verification's first text was delivered before its record.
	for i := 0; i < verifications; i += 5 {
		if _, err := pool.Exec(ctx, `INSERT INTO delivery_receipts (provider, message_id, status, received_at)
			VALUES ('fake', $1, 'delivered', now())`, msg(i, 0)); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UTC()
	send := func(i, n int) error {
		return store.Sent(ctx, otp.VerificationSend{ID: id(i), New: n == 0, Phone: ph, RequestID: fmt.Sprintf("req-%d-%d", i, n),
			Receipt: otp.Receipt{Provider: "fake", MessageID: msg(i, n)}, At: now, ExpiresAt: now.Add(10 * time.Minute), AttemptsLeft: 5})
	}
	var wg sync.WaitGroup
	errs := make(chan error, verifications+resent*resends)
	for i := range verifications {
		wg.Go(func() {
			if err := send(i, 0); err != nil {
				errs <- err
				return
			}
			if i < resent {
				// Resends race each other and other verifications' first texts.
				var inner sync.WaitGroup
				for n := 1; n <= resends; n++ {
					inner.Go(func() { errs <- send(i, n) })
				}
				inner.Wait()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	for i := range verifications {
		v, ok, err := store.Get(ctx, id(i))
		if err != nil || !ok {
			t.Fatalf("verification %d: found %v, %v", i, ok, err)
		}
		want, delivery := 1, ""
		if i < resent {
			want = 1 + resends
		}
		if i%5 == 0 && want == 1 {
			delivery = "delivered"
		}
		if v.Sends != want || v.Status != otp.VerificationPending || v.AttemptsLeft != 5 || v.DeliveryStatus != delivery {
			t.Errorf("verification %d: %+v; want %d sends, pending, 5 attempts, delivery %q", i, v, want, delivery)
		}
	}
	var sent, delivered int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE type = $1), count(*) FILTER (WHERE type = $2) FROM event_outbox`,
		events.VerificationSent, events.VerificationDelivered).Scan(&sent, &delivered); err != nil {
		t.Fatal(err)
	}
	if want := verifications + resent*resends; sent != want {
		t.Errorf("%d verification.sent events, want %d", sent, want)
	}
	if want := verifications / 5; delivered != want {
		t.Errorf("%d verification.delivered events, want %d", delivered, want)
	}
}
