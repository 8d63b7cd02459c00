package otp

import (
	"context"
	"crypto/sha256"
	"time"

	"github.com/google/uuid"
)

// Verification statuses (SPEC "Verifications").
const (
	VerificationPending  = "pending"
	VerificationApproved = "approved"
	VerificationExpired  = "expired"
	VerificationCanceled = "canceled"
	VerificationFailed   = "failed" // wrong guesses used up
)

// ENotPending answers a cancel of a verification that is not pending any more.
const ENotPending = "not_pending"

// Verification is a code's life, from its first text to approval, expiry,
// cancel or lockout. It never holds the code.
type Verification struct {
	ID             string
	Phone          string
	Country        string
	APIKey         string // the key that started it; "" without keys
	Status         string
	Sends          int
	AttemptsLeft   int
	DeliveryStatus string // the last text's provider status; "" until a receipt
	RequestID      string // the request that last changed it
	CreatedAt      time.Time
	UpdatedAt      time.Time
	ExpiresAt      time.Time
}

// VerificationSend is an accepted send as its verification records it: the
// first (New) or a resend of the pending code.
type VerificationSend struct {
	ID        string
	New       bool
	Phone     Phone
	APIKey    string
	RequestID string
	Receipt   Receipt
	At        time.Time
	ExpiresAt time.Time
	// AttemptsLeft is max_attempts on a new verification; a resend keeps
	// the record's.
	AttemptsLeft int
}

// VerificationCheck is a verify that changed the number's pending code:
// approved it, counted a wrong guess (Status pending) or locked it out
// (Status failed).
type VerificationCheck struct {
	Phone        Phone
	Status       string
	AttemptsLeft int
	APIKey       string
	RequestID    string
	At           time.Time
}

// Verifications keeps verification records and the events they cause, each
// change durable (with its events) when the call returns. Package
// verification implements it on Postgres.
type Verifications interface {
	Sent(ctx context.Context, s VerificationSend) error
	Checked(ctx context.Context, c VerificationCheck) error
	Get(ctx context.Context, id string) (Verification, bool, error)
	// End moves a pending verification to status (canceled, expired) and
	// returns it as it is afterwards; changed is false when it was not
	// pending any more.
	End(ctx context.Context, id, status, requestID string, at time.Time) (v Verification, changed bool, err error)
}

// NoVerifications keeps nothing (dev mode without Postgres, tests): a
// verification can then not be looked up.
type NoVerifications struct{}

func (NoVerifications) Sent(context.Context, VerificationSend) error     { return nil }
func (NoVerifications) Checked(context.Context, VerificationCheck) error { return nil }
func (NoVerifications) Get(context.Context, string) (Verification, bool, error) {
	return Verification{}, false, nil
}
func (NoVerifications) End(context.Context, string, string, string, time.Time) (Verification, bool, error) {
	return Verification{}, false, nil
}

// CodeWithdrawer deletes a pending code only while it is still the one of
// one verification: its stored sealed form starts with prefix.
type CodeWithdrawer interface {
	Withdraw(ctx context.Context, phone string, prefix []byte) (bool, error)
}

// The verification id rides in front of the sealed code in the code store,
// as one value: a resend that finds the pending code finds its verification
// in the same atomic step, and no store or script had to learn a field.
// Layout: verificationTag, the id's 36 characters, the sealed code.
const (
	verificationTag = 'V'
	verificationLen = 1 + 36
)

// withVerification is the stored form of sealed for verification id.
func withVerification(id string, sealed []byte) []byte {
	out := make([]byte, 0, verificationLen+len(sealed))
	out = append(out, verificationTag)
	out = append(out, id...)
	return append(out, sealed...)
}

// verificationPrefix is what a stored code of verification id starts with.
func verificationPrefix(id string) []byte { return withVerification(id, nil) }

// splitVerification reads a stored code's verification id and sealed code.
// A code stored before verifications existed has no id: it gets one derived
// from its sealed form, the same on every resend.
func splitVerification(stored []byte) (id string, sealed []byte) {
	if len(stored) > verificationLen && stored[0] == verificationTag {
		if u, err := uuid.ParseBytes(stored[1:verificationLen]); err == nil {
			return u.String(), stored[verificationLen:]
		}
	}
	sum := sha256.Sum256(stored)
	return uuid.NewSHA1(uuid.Nil, sum[:]).String(), stored
}

// newVerificationID is a UUIDv7: unique, ordered by time in indexes.
func newVerificationID() string { return uuid.Must(uuid.NewV7()).String() }

// ValidVerificationID reports whether id could name a verification.
func ValidVerificationID(id string) bool {
	_, err := uuid.Parse(id)
	return err == nil && len(id) == 36
}

// testVerificationID is a test number's verification id: fixed, like its
// code, and never recorded.
func testVerificationID(p Phone) string {
	return uuid.NewSHA1(uuid.Nil, []byte("test number "+p.E164)).String()
}
