package verification_test

import (
	"context"
	"testing"
	"time"

	"smsgw/otp"
)

// TestRecordOutlivesItsRequest: a client that hangs up once its text is
// out must not cancel the record of that text, nor of the verify that
// approved it: both happened.
func TestRecordOutlivesItsRequest(t *testing.T) {
	store, _, ph := newStore(t)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	const id = "0199aaaa-0000-7000-8000-0000000000a1"
	now := time.Now().UTC()
	if err := store.Sent(gone, otp.VerificationSend{ID: id, New: true, Phone: ph, RequestID: "req-1",
		At: now, ExpiresAt: now.Add(10 * time.Minute), AttemptsLeft: 5}); err != nil {
		t.Fatalf("send recorded under a cancelled request: %v", err)
	}
	if err := store.Checked(gone, otp.VerificationCheck{Phone: ph, Status: otp.VerificationApproved, RequestID: "req-2", At: now}); err != nil {
		t.Fatalf("verify recorded under a cancelled request: %v", err)
	}
	v, ok, err := store.Get(context.Background(), id)
	if err != nil || !ok || v.Status != otp.VerificationApproved || v.Sends != 1 {
		t.Fatalf("record: %+v found %v err %v; want approved after one send", v, ok, err)
	}
}
