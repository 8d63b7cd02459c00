package otptest

import (
	"context"
	"sync"
	"time"

	"smsgw/otp"
)

// Limiter is an otp.Limiter in memory: each subject's key holds the tickets
// it admitted, and a request is refused when any of its windows is full.
type Limiter struct {
	AllowFn  func(ctx context.Context, ticket string, subjects []otp.Subject) (otp.Decision, error)
	RefundFn func(ctx context.Context, ticket string, subjects []otp.Subject) error

	mu      sync.Mutex
	tickets map[string][]string
	refunds int
}

func (l *Limiter) Allow(ctx context.Context, ticket string, subjects []otp.Subject) (otp.Decision, error) {
	if l.AllowFn != nil {
		return l.AllowFn(ctx, ticket, subjects)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tickets == nil {
		l.tickets = map[string][]string{}
	}
	dec := otp.Decision{Allowed: true, Now: time.Now()}
	for _, s := range subjects {
		for _, r := range s.Rules {
			w := otp.Window{Scope: s.Scope, Name: s.Name, Rule: r, Used: len(l.tickets[s.Key]), Reset: r.Window}
			if w.Used >= r.Max && dec.Allowed {
				dec.Allowed, dec.Tightest, dec.RetryAfter = false, w, r.Window
			}
			dec.Policies = append(dec.Policies, w)
		}
	}
	if !dec.Allowed {
		return dec, nil
	}
	for _, s := range subjects {
		l.tickets[s.Key] = append(l.tickets[s.Key], ticket)
	}
	for i := range dec.Policies {
		dec.Policies[i].Used++
		if i == 0 || dec.Policies[i].Remaining() < dec.Tightest.Remaining() {
			dec.Tightest = dec.Policies[i]
		}
	}
	return dec, nil
}

func (l *Limiter) Refund(ctx context.Context, ticket string, subjects []otp.Subject) error {
	if l.RefundFn != nil {
		return l.RefundFn(ctx, ticket, subjects)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refunds++
	for _, s := range subjects {
		kept := l.tickets[s.Key][:0]
		for _, t := range l.tickets[s.Key] {
			if t != ticket {
				kept = append(kept, t)
			}
		}
		l.tickets[s.Key] = kept
	}
	return nil
}

func (l *Limiter) Status(_ context.Context, subjects []otp.Subject) ([]otp.Window, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ws []otp.Window
	for _, s := range subjects {
		for _, r := range s.Rules {
			ws = append(ws, otp.Window{Scope: s.Scope, Name: s.Name, Rule: r, Used: len(l.tickets[s.Key])})
		}
	}
	return ws, nil
}

func (l *Limiter) Reset(_ context.Context, subjects []otp.Subject) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range subjects {
		delete(l.tickets, s.Key)
	}
	return nil
}

// Used is how many requests key's windows hold.
func (l *Limiter) Used(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.tickets[key])
}

// Refunds is how many times Refund ran (without RefundFn).
func (l *Limiter) Refunds() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refunds
}
