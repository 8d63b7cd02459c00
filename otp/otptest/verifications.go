package otptest

import (
	"context"
	"sync"
	"time"

	"smsgw/otp"
)

// Verifications is an otp.Verifications that keeps the sends and checks
// it is told of; Get and End answer from GetFn and EndFn (nothing found,
// nothing changed without them).
type Verifications struct {
	SentFn    func(ctx context.Context, s otp.VerificationSend) error
	CheckedFn func(ctx context.Context, c otp.VerificationCheck) error
	GetFn     func(ctx context.Context, id string) (otp.Verification, bool, error)
	EndFn     func(ctx context.Context, id, status, requestID string, at time.Time) (otp.Verification, bool, error)

	mu      sync.Mutex
	sent    []otp.VerificationSend
	checked []otp.VerificationCheck
}

func (v *Verifications) Sent(ctx context.Context, s otp.VerificationSend) error {
	v.mu.Lock()
	v.sent = append(v.sent, s)
	v.mu.Unlock()
	if v.SentFn != nil {
		return v.SentFn(ctx, s)
	}
	return nil
}

func (v *Verifications) Checked(ctx context.Context, c otp.VerificationCheck) error {
	v.mu.Lock()
	v.checked = append(v.checked, c)
	v.mu.Unlock()
	if v.CheckedFn != nil {
		return v.CheckedFn(ctx, c)
	}
	return nil
}

func (v *Verifications) Get(ctx context.Context, id string) (otp.Verification, bool, error) {
	if v.GetFn == nil {
		return otp.Verification{}, false, nil
	}
	return v.GetFn(ctx, id)
}

func (v *Verifications) End(ctx context.Context, id, status, requestID string, at time.Time) (otp.Verification, bool, error) {
	if v.EndFn == nil {
		return otp.Verification{}, false, nil
	}
	return v.EndFn(ctx, id, status, requestID, at)
}

// Sends is every send Sent was told of.
func (v *Verifications) Sends() []otp.VerificationSend {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]otp.VerificationSend(nil), v.sent...)
}

// Checks is every check Checked was told of.
func (v *Verifications) Checks() []otp.VerificationCheck {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]otp.VerificationCheck(nil), v.checked...)
}

// Withdrawer is an otp.CodeWithdrawer; without WithdrawFn it withdraws
// nothing.
type Withdrawer struct {
	WithdrawFn func(ctx context.Context, phone string, prefix []byte) (bool, error)
}

func (w Withdrawer) Withdraw(ctx context.Context, phone string, prefix []byte) (bool, error) {
	if w.WithdrawFn == nil {
		return false, nil
	}
	return w.WithdrawFn(ctx, phone, prefix)
}
