package otptest

import (
	"bytes"
	"context"
	"sync"
	"time"

	"smsgw/otp"
)

// Codes is an otp.CodeStore in memory.
type Codes struct {
	IssueFn   func(ctx context.Context, phone string, c otp.StoredCode, ttl time.Duration) ([]byte, error)
	ReplaceFn func(ctx context.Context, phone string, c otp.StoredCode, ttl time.Duration) error
	DiscardFn func(ctx context.Context, phone string, mac []byte) error
	CheckFn   func(ctx context.Context, phone string, mac []byte, maxAttempts int) (otp.CodeCheck, int, error)

	mu      sync.Mutex
	pending map[string]*pendingCode
}

type pendingCode struct {
	code     otp.StoredCode
	attempts int
	ttl      time.Duration
}

func (c *Codes) get(phone string) *pendingCode {
	if c.pending == nil {
		c.pending = map[string]*pendingCode{}
	}
	return c.pending[phone]
}

func (c *Codes) Issue(ctx context.Context, phone string, sc otp.StoredCode, ttl time.Duration) ([]byte, error) {
	if c.IssueFn != nil {
		return c.IssueFn(ctx, phone, sc, ttl)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.get(phone); p != nil {
		p.ttl = ttl
		return p.code.Sealed, nil
	}
	c.pending[phone] = &pendingCode{code: sc, ttl: ttl}
	return nil, nil
}

func (c *Codes) Replace(ctx context.Context, phone string, sc otp.StoredCode, ttl time.Duration) error {
	if c.ReplaceFn != nil {
		return c.ReplaceFn(ctx, phone, sc, ttl)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.get(phone)
	if p == nil {
		p = &pendingCode{}
		c.pending[phone] = p
	}
	p.code, p.ttl = sc, ttl
	return nil
}

func (c *Codes) Discard(ctx context.Context, phone string, mac []byte) error {
	if c.DiscardFn != nil {
		return c.DiscardFn(ctx, phone, mac)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.get(phone); p != nil && bytes.Equal(p.code.MAC, mac) {
		delete(c.pending, phone)
	}
	return nil
}

func (c *Codes) Check(ctx context.Context, phone string, mac []byte, maxAttempts int) (otp.CodeCheck, int, error) {
	if c.CheckFn != nil {
		return c.CheckFn(ctx, phone, mac, maxAttempts)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.get(phone)
	switch {
	case p == nil:
		return otp.CodeNone, 0, nil
	case bytes.Equal(p.code.MAC, mac):
		delete(c.pending, phone)
		return otp.CodeApproved, 0, nil
	}
	p.attempts++
	left := max(maxAttempts-p.attempts, 0)
	if left == 0 {
		delete(c.pending, phone)
	}
	return otp.CodeWrong, left, nil
}

func (c *Codes) Pending(_ context.Context, phone string) (otp.PendingCode, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.get(phone)
	if p == nil {
		return otp.PendingCode{}, false, nil
	}
	return otp.PendingCode{Attempts: p.attempts, ExpiresIn: p.ttl}, true, nil
}

// Put stores a pending code as it is, e.g. one sealed under another secret.
func (c *Codes) Put(phone string, sc otp.StoredCode, attempts int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.get(phone)
	c.pending[phone] = &pendingCode{code: sc, attempts: attempts}
}
