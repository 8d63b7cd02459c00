package region

import (
	"context"
	"errors"
	"fmt"
	"time"

	"smsgw/otp"
	"smsgw/ratelimit"
)

// limiter decides a request over the regions that hold its subjects. A
// request whose subjects all live here is one local decision, exactly as in
// a single region. One whose destination is homed elsewhere is decided in
// three steps, of which only the second crosses regions:
//
//  1. reserve the local subjects (client address windows) here; a local
//     refusal ends the request without crossing;
//  2. decide the destination's subjects in the home region, recording them
//     for good when admitted (one round trip);
//  3. commit the local reservation, or release it when the home refused.
//
// No window holds more than its max at any moment, in either region, so the
// decision is as exact as one on one Redis. A home out of reach in step 2
// fails closed, or with a fallback allowance decides from a local ledger.
type limiter struct{ d *Deployment }

var _ otp.Limiter = limiter{}

// part is the subjects one region holds.
type part struct {
	store    *Store
	subjects []otp.Subject
}

// split sorts the subjects into the local part and, for subjects homed
// elsewhere, the home region's part. A request's homed subjects all derive
// from one number, so they share one home.
func (l limiter) split(subjects []otp.Subject) (local []otp.Subject, remote part, err error) {
	for _, s := range subjects {
		if s.Country == "" {
			local = append(local, s)
			continue
		}
		h := l.d.home(s.Country)
		switch {
		case h == l.d.local:
			local = append(local, s)
		case remote.store == nil || remote.store == h:
			remote.store = h
			remote.subjects = append(remote.subjects, s)
		default:
			return nil, part{}, fmt.Errorf("region: subjects of one request homed in %s and %s", remote.store.Name, h.Name)
		}
	}
	return local, remote, nil
}

func (l limiter) Allow(ctx context.Context, ticket string, subjects []otp.Subject) (otp.Decision, error) {
	local, remote, err := l.split(subjects)
	if err != nil {
		return otp.Decision{}, err
	}
	here := l.d.local.Limiter
	if remote.store == nil {
		return here.Allow(ctx, ticket, local)
	}
	var dl otp.Decision
	if len(local) > 0 {
		if dl, err = here.Reserve(ctx, ticket, local); err != nil || !dl.Allowed {
			dl.Policies = ratelimit.PoliciesOf(subjects)
			return dl, err
		}
	}
	dr, err := l.decideHome(ctx, ticket, remote)
	release := func() {
		if len(local) == 0 {
			return
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if rerr := here.Release(rctx, ticket, local); rerr != nil {
			l.d.o.Log.WarnContext(ctx, "region: local reservation not released; it expires with its lease", "err", rerr)
		}
	}
	if err != nil {
		release()
		return otp.Decision{}, err
	}
	if !dr.Allowed {
		release()
		dr.Policies = ratelimit.PoliciesOf(subjects)
		return dr, nil
	}
	if len(local) > 0 {
		if err := here.Commit(ctx, ticket, local); err != nil {
			release()
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			return otp.Decision{}, errors.Join(err, l.refundHome(rctx, ticket, remote))
		}
	}
	return merged(dl, dr, len(local) > 0, subjects), nil
}

// decideHome decides the home region's part for good, falling back on the
// local ledger when the home is out of reach and a fallback is allowed.
func (l limiter) decideHome(ctx context.Context, ticket string, remote part) (otp.Decision, error) {
	d, err := remote.store.Limiter.Allow(ctx, ticket, remote.subjects)
	if err == nil || !l.d.fallsBack(remote.store, err) {
		return d, err
	}
	l.d.o.Log.WarnContext(ctx, "region: home out of reach; deciding from the fallback ledger", "home", remote.store.Name, "err", err)
	return l.d.fallbackAllow(ctx, ticket, remote)
}

// refundHome takes a home decision back, wherever it was made.
func (l limiter) refundHome(ctx context.Context, ticket string, remote part) error {
	err := remote.store.Limiter.Refund(ctx, ticket, remote.subjects)
	if l.d.o.Fallback > 0 {
		// Harmless when the ticket was decided at home.
		if ferr := l.d.local.Limiter.Refund(ctx, ticket, l.d.fallbackSubjects(remote)); ferr != nil {
			return errors.Join(err, ferr)
		}
		if Unreachable(err) {
			return nil // a fallback admission; its carried entry stays counted (never admits more)
		}
	}
	return err
}

// merged is the decision of an admitted request: the bounding window is the
// one with the least room over both parts, ties going to the longer window.
func merged(dl, dr otp.Decision, withLocal bool, subjects []otp.Subject) otp.Decision {
	d := dr
	if withLocal {
		t, b := dl.Tightest, dr.Tightest
		if room, bRoom := t.Rule.Max-t.Used, b.Rule.Max-b.Used; room < bRoom || (room == bRoom && t.Rule.Window > b.Rule.Window) {
			d.Tightest = t
		}
		d.Now = dl.Now
	}
	d.Policies = ratelimit.PoliciesOf(subjects)
	return d
}

func (l limiter) Refund(ctx context.Context, ticket string, subjects []otp.Subject) error {
	local, remote, err := l.split(subjects)
	if err != nil {
		return err
	}
	var errs []error
	if len(local) > 0 {
		errs = append(errs, l.d.local.Limiter.Refund(ctx, ticket, local))
	}
	if remote.store != nil {
		errs = append(errs, l.refundHome(ctx, ticket, remote))
	}
	return errors.Join(errs...)
}

// Status reads each part where it lives, in the subjects' order.
func (l limiter) Status(ctx context.Context, subjects []otp.Subject) ([]otp.Window, error) {
	local, remote, err := l.split(subjects)
	if err != nil {
		return nil, err
	}
	if remote.store == nil {
		return l.d.local.Limiter.Status(ctx, local)
	}
	byKey := map[string][]otp.Window{}
	for _, p := range []part{{l.d.local, local}, remote} {
		if len(p.subjects) == 0 {
			continue
		}
		ws, err := p.store.Limiter.Status(ctx, p.subjects)
		if err != nil {
			return nil, fmt.Errorf("region %s: %w", p.store.Name, err)
		}
		for _, s := range p.subjects {
			byKey[s.Key], ws = ws[:len(s.Rules)], ws[len(s.Rules):]
		}
	}
	var out []otp.Window
	for _, s := range subjects {
		out = append(out, byKey[s.Key]...)
	}
	return out, nil
}

// Reset clears each part where it lives (and the fallback ledger's share).
func (l limiter) Reset(ctx context.Context, subjects []otp.Subject) error {
	local, remote, err := l.split(subjects)
	if err != nil {
		return err
	}
	if remote.store != nil {
		if err := remote.store.Limiter.Reset(ctx, remote.subjects); err != nil {
			return fmt.Errorf("region %s: %w", remote.store.Name, err)
		}
		if l.d.o.Fallback > 0 {
			local = append(local, l.d.fallbackSubjects(remote)...)
		}
	}
	return l.d.local.Limiter.Reset(ctx, local)
}
