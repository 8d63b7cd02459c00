package otp

import (
	"context"
	"errors"
	"time"
)

// Caller is who asks about a verification: an API key sees only the
// verifications it started, the admin token all.
type Caller struct {
	APIKey string
	Admin  bool
}

// RecordSent writes an accepted send into its verification (and its
// verification.sent event), durable when it returns. The text is out by
// then: an error is the caller's to log, never a reason to answer otherwise.
// A replay, a test number or a send without a verification records nothing.
func (s *Service) RecordSent(ctx context.Context, res SendResult, apiKey, requestID string) error {
	if res.VerificationID == "" || res.Replayed || s.isTestNumber(res.Phone) {
		return nil
	}
	now := time.Now().UTC()
	return s.Verifications.Sent(ctx, VerificationSend{ID: res.VerificationID, New: res.VerificationStarted,
		Phone: res.Phone, APIKey: apiKey, RequestID: requestID, Receipt: res.Receipt, At: now,
		ExpiresAt: now.Add(s.cfg.CodeTTL), AttemptsLeft: s.cfg.MaxAttempts})
}

// RecordChecked writes a verify that changed the number's pending code into
// its verification: approved, a wrong guess counted, or locked out (failed).
// Any other outcome changed no code and records nothing.
func (s *Service) RecordChecked(ctx context.Context, res VerifyResult, verr error, apiKey, requestID string) error {
	if res.Phone.E164 == "" || s.isTestNumber(res.Phone) {
		return nil
	}
	c := VerificationCheck{Phone: res.Phone, APIKey: apiKey, RequestID: requestID, At: time.Now().UTC()}
	switch {
	case verr == nil:
		c.Status = VerificationApproved
	case ErrorCode(verr) == EInvalidCode && res.AttemptsLeft == 0:
		c.Status = VerificationFailed
	case ErrorCode(verr) == EInvalidCode:
		c.Status, c.AttemptsLeft = VerificationPending, res.AttemptsLeft
	default:
		return nil
	}
	return s.Verifications.Checked(ctx, c)
}

// Verification returns verification id as caller may see it: another key's
// is not found, like one that never was.
func (s *Service) Verification(ctx context.Context, id string, caller Caller) (Verification, error) {
	if !ValidVerificationID(id) {
		return Verification{}, verificationNotFound()
	}
	v, ok, err := s.Verifications.Get(ctx, id)
	if err != nil {
		return Verification{}, unavailable("verifications", err)
	}
	if !ok || (!caller.Admin && v.APIKey != caller.APIKey) {
		return Verification{}, verificationNotFound()
	}
	return v, nil
}

// cancelSettle bounds the wait for a verify that used the code up just
// before a cancel (its record follows the code store by a write).
const cancelSettle = 2 * time.Second

// CancelVerification withdraws a pending verification's code, so verify
// then finds nothing pending, and records it canceled. The code is deleted
// only while it is still this verification's (one atomic step in the code
// store), so a racing approval or a newer code is never undone.
func (s *Service) CancelVerification(ctx context.Context, id string, caller Caller, requestID string) (Verification, error) {
	v, err := s.Verification(ctx, id, caller)
	if err != nil {
		return v, err
	}
	if v.Status != VerificationPending {
		return v, notPending(v.Status)
	}
	w, ok := s.Codes.(CodeWithdrawer)
	if !ok {
		return v, unavailable("codes", errors.New("this code store cannot withdraw a verification's code"))
	}
	withdrawn, err := w.Withdraw(ctx, v.Phone, verificationPrefix(id))
	if err != nil {
		return v, unavailable("codes", err)
	}
	if !withdrawn {
		// Used up or locked out just now (its record follows), or gone with
		// its expiry or a lost Redis: wait for the record a moment.
		if v, err = s.settledVerification(ctx, id); err != nil || v.Status != VerificationPending {
			if err == nil {
				err = notPending(v.Status)
			}
			return v, err
		}
	}
	end := VerificationCanceled
	if !withdrawn && !time.Now().Before(v.ExpiresAt) {
		end = VerificationExpired
	}
	after, changed, err := s.Verifications.End(ctx, id, end, requestID, time.Now().UTC())
	if err != nil {
		return v, unavailable("verifications", err)
	}
	if !changed || after.Status != VerificationCanceled {
		return after, notPending(after.Status)
	}
	return after, nil
}

// settledVerification polls id's record until it is not pending or
// cancelSettle has passed, and returns it as it then is.
func (s *Service) settledVerification(ctx context.Context, id string) (Verification, error) {
	deadline := time.Now().Add(cancelSettle)
	for {
		v, ok, err := s.Verifications.Get(ctx, id)
		if err != nil {
			return v, unavailable("verifications", err)
		}
		if !ok {
			return v, verificationNotFound()
		}
		if v.Status != VerificationPending || time.Now().After(deadline) {
			return v, nil
		}
		select {
		case <-ctx.Done():
			return v, unavailable("verifications", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func verificationNotFound() *Error {
	return Errorf(ENotFound, "no such verification")
}

func notPending(status string) *Error {
	return &Error{Code: ENotPending, Message: "the verification is not pending: it is " + status,
		Fields: map[string]any{"status": status}}
}
