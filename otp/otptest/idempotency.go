package otptest

import (
	"context"
	"sync"
	"time"

	"smsgw/otp"
)

// Idempotency is an otp.IdempotencyStore in memory.
type Idempotency struct {
	ClaimFn  func(ctx context.Context, scope, ticket string, ttl time.Duration) (otp.Claim, []byte, error)
	SettleFn func(ctx context.Context, scope, ticket string, answer []byte, ttl time.Duration) error

	mu     sync.Mutex
	scopes map[string]*scope
}

type scope struct {
	ticket string
	answer []byte
}

func (s *Idempotency) Claim(ctx context.Context, name, ticket string, ttl time.Duration) (otp.Claim, []byte, error) {
	if s.ClaimFn != nil {
		return s.ClaimFn(ctx, name, ticket, ttl)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.scopes == nil {
		s.scopes = map[string]*scope{}
	}
	switch sc := s.scopes[name]; {
	case sc == nil:
		s.scopes[name] = &scope{ticket: ticket}
		return otp.Claimed, nil, nil
	case sc.answer != nil:
		return otp.ClaimDone, sc.answer, nil
	case sc.ticket == ticket:
		return otp.Claimed, nil, nil
	}
	return otp.ClaimBusy, nil, nil
}

func (s *Idempotency) Settle(ctx context.Context, name, ticket string, answer []byte, ttl time.Duration) error {
	if s.SettleFn != nil {
		return s.SettleFn(ctx, name, ticket, answer, ttl)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := s.scopes[name]
	if sc == nil || sc.ticket != ticket {
		return nil
	}
	if answer == nil {
		delete(s.scopes, name)
		return nil
	}
	sc.answer = answer
	return nil
}

// Held reports whether scope is claimed or answered.
func (s *Idempotency) Held(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scopes[name] != nil
}
