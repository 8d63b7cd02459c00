package otp

import (
	"context"
	"fmt"
)

// issuedCode says whether issue stored a new code, and which.
type issuedCode struct {
	isNew bool
	mac   []byte
	// verification is the id of the code's verification (see
	// withVerification): new with a new code, the pending one's on a resend.
	verification string
	// started is true when the code began a verification: not on a resend,
	// nor when a code sealed under an old secret was replaced.
	started bool
}

// newCode draws a code and seals it for the store.
func (s *Service) newCode(phone string) (string, StoredCode, error) {
	code, err := NewCode(s.cfg.CodeLength)
	if err != nil {
		return "", StoredCode{}, fmt.Errorf("generate code: %w", err)
	}
	fresh, err := s.seal(phone, code)
	if err != nil {
		return "", StoredCode{}, err
	}
	fresh.Sealed = withVerification(newVerificationID(), fresh.Sealed)
	return code, fresh, nil
}

// adopt picks the code to text once the store answered: the pending one
// (sealed as pending), or the new one when it was stored (pending nil).
func (s *Service) adopt(ctx context.Context, phone, code string, fresh StoredCode, pending []byte) (string, issuedCode, error) {
	freshID, freshSealed := splitVerification(fresh.Sealed)
	if pending == nil {
		return code, issuedCode{isNew: true, mac: fresh.MAC, verification: freshID, started: true}, nil
	}
	id, sealed := splitVerification(pending)
	old, err := s.Secrets.Open(phone, sealed)
	if err == nil {
		return old, issuedCode{verification: id}, nil
	}
	// Sealed under a previous SMSGW_SECRET: its MAC cannot match any guess
	// either, so the new code takes its place (attempts kept), in the same
	// verification.
	s.log.WarnContext(ctx, "pending code sealed under another secret; replacing it")
	fresh.Sealed = withVerification(id, freshSealed)
	if err := s.Codes.Replace(ctx, phone, fresh, s.cfg.CodeTTL); err != nil {
		return "", issuedCode{}, unavailable("codes", err)
	}
	return code, issuedCode{isNew: true, mac: fresh.MAC, verification: id}, nil
}

func (s *Service) seal(phone, code string) (StoredCode, error) {
	sealed, err := s.Secrets.Seal(phone, code)
	if err != nil {
		return StoredCode{}, fmt.Errorf("seal code: %w", err)
	}
	return StoredCode{MAC: s.Secrets.MAC(phone, code), Sealed: sealed}, nil
}
