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

// TestVerifiesSharingAGroup races verifies into the group commit: for each
// of many numbers a wrong guess and the approval at once, so one group can
// hold both checks of a number. Whichever comes first, the verification
// ends approved (a check after the approval finds nothing pending) with
// exactly one verification.approved event; a number never recorded gets
// nothing.
func TestVerifiesSharingAGroup(t *testing.T) {
	ctx := context.Background()
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(receiver.Close)
	store, pool, _ := newStore(t, events.Webhook{URL: receiver.URL, Key: []byte("0123456789abcdef")})

	const numbers = 100
	phone := func(i int) otp.Phone {
		ph, err := otp.ParsePhone(fmt.Sprintf("+1415555%04d", 1000+i), "US")
		if err != nil {
			t.Fatal(err)
		}
		return ph
	}
	id := func(i int) string { return fmt.Sprintf("0199bbbb-0000-7000-8000-%012d", i) }
	now := time.Now().UTC()
	var wg sync.WaitGroup
	for i := range numbers {
		wg.Go(func() {
			if err := store.Sent(ctx, otp.VerificationSend{ID: id(i), New: true, Phone: phone(i), RequestID: "send",
				At: now, ExpiresAt: now.Add(10 * time.Minute), AttemptsLeft: 5}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	check := func(ph otp.Phone, status string, left int) {
		if err := store.Checked(ctx, otp.VerificationCheck{Phone: ph, Status: status, AttemptsLeft: left, RequestID: status, At: now}); err != nil {
			t.Error(err)
		}
	}
	for i := range numbers {
		wg.Go(func() { check(phone(i), otp.VerificationPending, 4) })
		wg.Go(func() { check(phone(i), otp.VerificationApproved, 0) })
	}
	unrecorded := phone(numbers)
	wg.Go(func() { check(unrecorded, otp.VerificationApproved, 0) })
	wg.Wait()

	for i := range numbers {
		v, ok, err := store.Get(ctx, id(i))
		if err != nil || !ok || v.Status != otp.VerificationApproved {
			t.Fatalf("verification %d: %+v found %v, %v; want approved", i, v, ok, err)
		}
	}
	var approved, rows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE type = 'verification.approved'), count(*) FROM event_outbox
		WHERE type <> $1`, events.VerificationSent).Scan(&approved, &rows); err != nil {
		t.Fatal(err)
	}
	if approved != numbers || rows != numbers {
		t.Errorf("%d verification.approved events of %d events after the sends, want %d and nothing else", approved, rows, numbers)
	}
	if recent, err := store.Recent(ctx, unrecorded.E164, 5); err != nil || len(recent) != 0 {
		t.Errorf("a number never recorded: %d verifications, %v", len(recent), err)
	}
}
