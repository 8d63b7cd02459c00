package otp

import (
	"context"
	"crypto/rand"
	"math/big"
	"time"
)

// NewCode returns length decimal digits from crypto/rand, uniformly: every
// code is equally likely, leading zeros included.
func NewCode(length int) (string, error) {
	limit := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(length)), nil)
	n, err := rand.Int(rand.Reader, limit)
	if err != nil {
		return "", err
	}
	digits := n.String()
	buf := make([]byte, length)
	pad := length - len(digits)
	for i := 0; i < pad; i++ {
		buf[i] = '0'
	}
	copy(buf[pad:], digits)
	return string(buf), nil
}

// StoredCode is a pending code as the store keeps it: never in clear.
type StoredCode struct {
	MAC    []byte // Secrets.MAC: compares a guess
	Sealed []byte // Secrets.Seal: texts the same code again on a resend
}

// CodeCheck is what a guess found.
type CodeCheck int

const (
	CodeNone     CodeCheck = iota // nothing pending: never sent, expired, used or locked out
	CodeApproved                  // the guess matched; the code is used up
	CodeWrong                     // the guess missed; an attempt is counted
)

// PendingCode is what the support desk may see of a pending code.
type PendingCode struct {
	Attempts  int
	ExpiresIn time.Duration
}

// CodeStore keeps at most one pending code per phone (E.164). Every method is
// atomic on its own; none ever sees a code in clear.
type CodeStore interface {
	// Issue stores c as phone's code for ttl, unless a code is pending: then
	// that one stays, with its attempt count, its expiry is renewed to ttl,
	// and its sealed form is returned.
	Issue(ctx context.Context, phone string, c StoredCode, ttl time.Duration) (pendingSealed []byte, err error)
	// Replace puts c in place of the pending code, keeping the attempt count.
	Replace(ctx context.Context, phone string, c StoredCode, ttl time.Duration) error
	// Discard deletes phone's pending code if it is still the one with mac.
	Discard(ctx context.Context, phone string, mac []byte) error
	// Check compares a guess's MAC with the pending code: a match uses the
	// code up; a miss counts an attempt and deletes the code once
	// maxAttempts misses are counted. It returns the attempts left.
	Check(ctx context.Context, phone string, mac []byte, maxAttempts int) (CodeCheck, int, error)
	// Pending reports phone's pending code, if any.
	Pending(ctx context.Context, phone string) (PendingCode, bool, error)
}

// Claim is the state of an idempotency scope.
type Claim int

const (
	Claimed   Claim = iota + 1 // this request holds the scope: it runs
	ClaimBusy                  // another request holds it and has not answered yet
	ClaimDone                  // the scope has its answer
)

// IdempotencyStore remembers the answer to a request retried with the same
// Idempotency-Key. A scope is claimed by one request (its ticket) until it
// settles it with an answer, or with none to let a retry run afresh.
type IdempotencyStore interface {
	Claim(ctx context.Context, scope, ticket string, ttl time.Duration) (Claim, []byte, error)
	Settle(ctx context.Context, scope, ticket string, answer []byte, ttl time.Duration) error
}
