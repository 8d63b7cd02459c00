package region

import (
	"context"
	"time"

	"smsgw/otp"
)

// codes keeps each number's pending code in its home region. While the home
// is out of reach and a fallback is allowed, a code is issued into (and
// checked against) the local Redis, so a send admitted under fallback can be
// verified through this region.
type codes struct{ d *Deployment }

var _ otp.CodeStore = codes{}

func (c codes) Issue(ctx context.Context, phone string, code otp.StoredCode, ttl time.Duration) ([]byte, error) {
	home := c.d.homeOfNumber(phone)
	sealed, err := home.Codes.Issue(ctx, phone, code, ttl)
	if c.d.fallsBack(home, err) {
		return c.d.o.FallbackCodes.Issue(ctx, phone, code, ttl)
	}
	return sealed, err
}

func (c codes) Replace(ctx context.Context, phone string, code otp.StoredCode, ttl time.Duration) error {
	home := c.d.homeOfNumber(phone)
	err := home.Codes.Replace(ctx, phone, code, ttl)
	if c.d.fallsBack(home, err) {
		return c.d.o.FallbackCodes.Replace(ctx, phone, code, ttl)
	}
	return err
}

func (c codes) Discard(ctx context.Context, phone string, mac []byte) error {
	home := c.d.homeOfNumber(phone)
	err := home.Codes.Discard(ctx, phone, mac)
	if home != c.d.local && c.d.o.Fallback > 0 {
		// The code may have been issued under fallback; discarding an absent
		// one is harmless.
		if ferr := c.d.o.FallbackCodes.Discard(ctx, phone, mac); ferr == nil && Unreachable(err) {
			return nil
		}
	}
	return err
}

// Check asks the home; with a fallback allowed, a guess the home does not
// approve (or cannot answer) is also checked against a code this region
// issued under fallback, which then decides when it holds one. A number
// texted by its home and by a cut region meanwhile has two codes, each with
// its own max_attempts (docs/regions.md).
func (c codes) Check(ctx context.Context, phone string, mac []byte, maxAttempts int) (otp.CodeCheck, int, error) {
	home := c.d.homeOfNumber(phone)
	res, left, err := home.Codes.Check(ctx, phone, mac, maxAttempts)
	if prev := c.d.previousOfNumber(phone); prev != nil && (err != nil || res != otp.CodeApproved) {
		// The country is being moved: a code its old home issued still
		// works, also while the new home is out of reach.
		if pres, pleft, perr := prev.Codes.Check(ctx, phone, mac, maxAttempts); perr == nil && pres != otp.CodeNone {
			return pres, pleft, nil
		}
	}
	if home == c.d.local || c.d.o.Fallback == 0 || (err == nil && res == otp.CodeApproved) || (err != nil && !Unreachable(err)) {
		return res, left, err
	}
	fres, fleft, ferr := c.d.o.FallbackCodes.Check(ctx, phone, mac, maxAttempts)
	if ferr != nil || fres == otp.CodeNone {
		if err != nil {
			return res, left, err
		}
		return res, left, nil
	}
	return fres, fleft, nil
}

func (c codes) Pending(ctx context.Context, phone string) (otp.PendingCode, bool, error) {
	home := c.d.homeOfNumber(phone)
	p, ok, err := home.Codes.Pending(ctx, phone)
	if home == c.d.local || c.d.o.Fallback == 0 || (err == nil && ok) || (err != nil && !Unreachable(err)) {
		return p, ok, err
	}
	return c.d.o.FallbackCodes.Pending(ctx, phone)
}

// Cancel removes the number's pending code, at home and in the fallback
// store.
func (c codes) Cancel(ctx context.Context, phone string) (bool, error) {
	home := c.d.homeOfNumber(phone)
	ok, err := home.Codes.Cancel(ctx, phone)
	if home != c.d.local && c.d.o.Fallback > 0 {
		fok, ferr := c.d.o.FallbackCodes.Cancel(ctx, phone)
		if ferr == nil && Unreachable(err) {
			return fok, nil
		}
		ok = ok || fok
	}
	return ok, err
}

// Withdraw removes the number's pending code while it is still the one of
// a verification (prefix), at home and in the fallback store, like Cancel:
// a verification started through any region can be canceled through any.
func (c codes) Withdraw(ctx context.Context, phone string, prefix []byte) (bool, error) {
	home := c.d.homeOfNumber(phone)
	ok, err := home.Codes.Withdraw(ctx, phone, prefix)
	if home != c.d.local && c.d.o.Fallback > 0 {
		fok, ferr := c.d.o.FallbackCodes.Withdraw(ctx, phone, prefix)
		if ferr == nil && Unreachable(err) {
			return fok, nil
		}
		ok = ok || fok
	}
	return ok, err
}

// idempotency keeps a send's idempotency scope in its number's home region.
type idempotency struct{ d *Deployment }

var _ otp.IdempotencyStore = idempotency{}

// homeOfScope finds the number in a scope (otp.SendScope).
func (i idempotency) homeOfScope(scope string) *Store {
	e164 := otp.ScopeNumber(scope)
	if e164 == "" {
		return i.d.local
	}
	return i.d.homeOfNumber(e164)
}

func (i idempotency) Claim(ctx context.Context, scope, ticket string, ttl time.Duration) (otp.Claim, []byte, error) {
	home := i.homeOfScope(scope)
	c, answer, err := home.Idempotency.Claim(ctx, scope, ticket, ttl)
	if i.d.fallsBack(home, err) {
		return i.d.o.FallbackIdempotency.Claim(ctx, scope, ticket, ttl)
	}
	return c, answer, err
}

func (i idempotency) Settle(ctx context.Context, scope, ticket string, answer []byte, ttl time.Duration) error {
	home := i.homeOfScope(scope)
	err := home.Idempotency.Settle(ctx, scope, ticket, answer, ttl)
	if i.d.fallsBack(home, err) {
		return i.d.o.FallbackIdempotency.Settle(ctx, scope, ticket, answer, ttl)
	}
	return err
}
