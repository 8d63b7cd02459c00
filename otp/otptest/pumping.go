package otptest

import (
	"context"
	"net/netip"
	"strings"
	"sync"

	"smsgw/otp"
)

// Pumping is an otp.PumpingGuard that holds, refuses and counts nothing
// unless its func fields say otherwise; it counts the calls it gets.
type Pumping struct {
	HeldFn     func(phone otp.Phone, ip netip.Addr) (otp.PumpingRefusal, bool)
	ReserveFn  func(ctx context.Context, phone otp.Phone, ip netip.Addr, bypass bool) (otp.PumpingReservation, error)
	ReleaseFn  func(ctx context.Context, r otp.PumpingReservation) error
	ApprovedFn func(ctx context.Context, phone otp.Phone) error

	mu                                 sync.Mutex
	reserved, released, sent, approved int
}

func (p *Pumping) Held(phone otp.Phone, ip netip.Addr) (otp.PumpingRefusal, bool) {
	if p.HeldFn != nil {
		return p.HeldFn(phone, ip)
	}
	return otp.PumpingRefusal{}, false
}

// Reserve answers ReserveFn's reservation, or a plain one; a reservation
// that is not refused carries a Ticket, so Release is called for it.
func (p *Pumping) Reserve(ctx context.Context, phone otp.Phone, ip netip.Addr, bypass bool) (otp.PumpingReservation, error) {
	r := otp.PumpingReservation{}
	var err error
	if p.ReserveFn != nil {
		r, err = p.ReserveFn(ctx, phone, ip, bypass)
	}
	if err == nil && r.Refused == nil {
		p.mu.Lock()
		p.reserved++
		p.mu.Unlock()
		if r.Ticket == nil {
			r.Ticket = phone.E164
		}
	}
	return r, err
}

func (p *Pumping) Release(ctx context.Context, r otp.PumpingReservation) error {
	p.mu.Lock()
	p.released++
	p.mu.Unlock()
	if p.ReleaseFn != nil {
		return p.ReleaseFn(ctx, r)
	}
	return nil
}

func (p *Pumping) Sent(otp.Phone) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sent++
}

func (p *Pumping) Approved(ctx context.Context, phone otp.Phone) error {
	p.mu.Lock()
	p.approved++
	p.mu.Unlock()
	if p.ApprovedFn != nil {
		return p.ApprovedFn(ctx, phone)
	}
	return nil
}

// Counts are the reservations made and released, the texts reported sent
// and the approvals credited.
func (p *Pumping) Counts() (reserved, released, sent, approved int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reserved, p.released, p.sent, p.approved
}

// PumpingAdmin is an otp.PumpingAdmin.
type PumpingAdmin struct {
	HoldsFn          func(ctx context.Context) (held, near []otp.PumpingHold, err error)
	LiftFn           func(ctx context.Context, rule, subject string) error
	ListOverridesFn  func(ctx context.Context) ([]otp.Override, error)
	SetOverrideFn    func(ctx context.Context, o otp.Override) error
	DeleteOverrideFn func(ctx context.Context, target string) error
}

func (a PumpingAdmin) Holds(ctx context.Context) (held, near []otp.PumpingHold, err error) {
	if a.HoldsFn == nil {
		return nil, nil, nil
	}
	return a.HoldsFn(ctx)
}

func (a PumpingAdmin) Lift(ctx context.Context, rule, subject string) error {
	if a.LiftFn == nil {
		return nil
	}
	return a.LiftFn(ctx, rule, subject)
}

func (a PumpingAdmin) ListOverrides(ctx context.Context) ([]otp.Override, error) {
	if a.ListOverridesFn == nil {
		return nil, nil
	}
	return a.ListOverridesFn(ctx)
}

func (a PumpingAdmin) SetOverride(ctx context.Context, o otp.Override) error {
	if a.SetOverrideFn == nil {
		return nil
	}
	return a.SetOverrideFn(ctx, o)
}

func (a PumpingAdmin) DeleteOverride(ctx context.Context, target string) error {
	if a.DeleteOverrideFn == nil {
		return nil
	}
	return a.DeleteOverrideFn(ctx, target)
}

// Overrides is an otp.Overrides: targets (a number or a range's E.164
// prefix) and their overrides; the longest target that prefixes a number
// applies. Expiry is not checked.
type Overrides map[string]otp.Override

func (o Overrides) Lookup(e164 string) (otp.Override, bool) {
	best, found := otp.Override{}, false
	for target, ov := range o {
		if strings.HasPrefix(e164, target) && (!found || len(target) > len(best.Target)) {
			best, found = ov, true
			best.Target = target
		}
	}
	return best, found
}

// Challenge is an otp.ChallengeVerifier of vendor Provider (none when
// empty) that accepts every token unless VerifyFn says otherwise.
type Challenge struct {
	Provider string
	VerifyFn func(ctx context.Context, token string, ip netip.Addr) error
}

func (c Challenge) Verify(ctx context.Context, token string, ip netip.Addr) error {
	if c.VerifyFn == nil {
		return nil
	}
	return c.VerifyFn(ctx, token, ip)
}

func (c Challenge) Widget() otp.ChallengeWidget {
	return otp.ChallengeWidget{Provider: c.Provider, SiteKey: "site-key"}
}
