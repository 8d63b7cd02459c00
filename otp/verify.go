package otp

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
)

// VerifyRequest is a validated-shape request to check a code.
type VerifyRequest struct {
	Ticket   string
	Phone    string
	Region   string
	Code     string
	ClientIP netip.Addr
}

// VerifyResult is what happened to a verify request, filled as far as the
// flow got.
type VerifyResult struct {
	Phone        Phone
	Decision     Decision
	Limited      bool
	AttemptsLeft int
	Reason       string
}

// Verify checks a guess against the phone's pending code. Compare, count,
// consume and lock out are one atomic step in the code store.
func (s *Service) Verify(ctx context.Context, req VerifyRequest) (VerifyResult, error) {
	var res VerifyResult
	if err := s.auditAccepting(); err != nil {
		res.Reason = ReasonAudit
		return res, err
	}
	code, err := NormalizeCode(req.Code)
	if err != nil {
		return res, err
	}
	phone, err := s.parsePhone(req.Phone, req.Region)
	if err != nil {
		return res, err
	}
	res.Phone = phone
	if s.isTestNumber(phone) {
		if err := s.verifyTestNumber(phone, code); err != nil {
			res.AttemptsLeft, res.Reason = s.cfg.MaxAttempts, "test_number"
			return res, err
		}
		res.Reason = "test_number"
		return res, nil
	}

	dec, err := s.Limiter.Allow(ctx, req.Ticket, s.VerifySubjects(req.ClientIP))
	if err != nil {
		return res, unavailable("limiter", err)
	}
	res.Decision, res.Limited = dec, true
	if !dec.Allowed {
		res.Reason = dec.Reason()
		return res, RateLimitedError(dec)
	}

	check, left, err := s.Codes.Check(ctx, phone.E164, s.Secrets.MAC(phone.E164, code), s.cfg.MaxAttempts)
	if err != nil {
		return res, unavailable("codes", err)
	}
	switch check {
	case CodeApproved:
		if err := s.Pumping.Approved(ctx, phone); err != nil {
			s.log.WarnContext(ctx, "pumping guard did not count an approval", "err", err)
		}
		return res, nil
	case CodeWrong:
		res.AttemptsLeft = left
		res.Reason = fmt.Sprintf("attempts_left:%d", left)
		if left == 0 {
			res.Reason = "locked_out"
		}
		return res, invalidCode(left)
	default:
		return res, noPendingCode()
	}
}

// maxCodeInput bounds what a client may send as a code.
const maxCodeInput = 32

// NormalizeCode accepts a code as people type or paste it ("123 456",
// "123-456") and returns its digits. Anything else is not a code at all.
func NormalizeCode(raw string) (string, error) {
	if len(raw) > maxCodeInput {
		return "", Errorf(EInvalidRequest, "code is too long")
	}
	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case '0' <= c && c <= '9':
			b.WriteByte(c)
		case c == ' ' || c == '-':
		default:
			return "", Errorf(EInvalidRequest, "code must be digits")
		}
	}
	if b.Len() == 0 {
		return "", Errorf(EInvalidRequest, "code is required")
	}
	return b.String(), nil
}
