package region

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
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

// split sorts the subjects into the local part and the parts of other
// regions that home the destination: its home, and while its country is
// being moved, its previous home too (both count the same subjects).
func (l limiter) split(subjects []otp.Subject, withPrevious bool) (local []otp.Subject, remotes []part) {
	for _, s := range subjects {
		if s.Country == "" {
			local = append(local, s)
			continue
		}
		if e164, ok := strings.CutPrefix(s.Key, otp.SendPhoneKey); ok {
			l.d.o.Homes.Remember(e164, s.Country) // the code's routing will need it
		}
		homes := []*Store{l.d.home(s.Country)}
		if prev := l.d.previous(s.Country); withPrevious && prev != nil && prev != homes[0] {
			homes = append(homes, prev)
		}
		for _, h := range homes {
			if h == l.d.local {
				local = append(local, s)
				continue
			}
			i := slices.IndexFunc(remotes, func(p part) bool { return p.store == h })
			if i < 0 {
				i = len(remotes)
				remotes = append(remotes, part{store: h})
			}
			remotes[i].subjects = append(remotes[i].subjects, s)
		}
	}
	return local, remotes
}

func (l limiter) Allow(ctx context.Context, ticket string, subjects []otp.Subject) (otp.Decision, error) {
	local, remotes := l.split(subjects, true)
	here := l.d.local.Limiter
	if len(remotes) == 0 {
		return here.Allow(ctx, ticket, local)
	}
	var dl otp.Decision
	var err error
	if len(local) > 0 {
		if dl, err = here.Reserve(ctx, ticket, local); err != nil || !dl.Allowed {
			dl.Policies = ratelimit.PoliciesOf(subjects)
			return dl, err
		}
	}
	var dr otp.Decision
	if len(remotes) == 1 {
		dr, err = l.decideHome(ctx, ticket, remotes[0])
	} else {
		dr, err = l.decideMoving(ctx, ticket, remotes)
	}
	release := func() { l.d.releaseLocal(ctx, ticket, local) }
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
			errs := []error{err}
			for _, r := range remotes {
				errs = append(errs, l.refundHome(rctx, ticket, r))
			}
			return otp.Decision{}, errors.Join(errs...)
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
	l.d.o.Log.WarnContext(ctx, "home region out of reach; deciding from the fallback ledger", "home", remote.store.Name, "err", err)
	return l.d.fallbackAllow(ctx, ticket, remote)
}

// decideMoving decides a destination whose country is being moved, in its
// new and its previous home at once, as over two Cluster shards: reserve in
// both, then commit in both, or release. A home out of reach is, with a
// fallback allowed, decided on the local ledger for that home once the
// others have reserved (so a refusal elsewhere records nothing to carry):
// whichever home sees every admission at a step of the move, each other
// region admits at most the fallback per window without it.
func (l limiter) decideMoving(ctx context.Context, ticket string, remotes []part) (otp.Decision, error) {
	decs := make([]otp.Decision, len(remotes))
	errs := make([]error, len(remotes))
	var wg sync.WaitGroup
	for i, r := range remotes {
		wg.Go(func() { decs[i], errs[i] = r.store.Limiter.Reserve(ctx, ticket, r.subjects) })
	}
	wg.Wait()
	var reserved, cut []part
	refused := -1
	for i, r := range remotes {
		switch {
		case errs[i] != nil && l.d.fallsBack(r.store, errs[i]):
			cut, errs[i] = append(cut, r), nil
		case errs[i] == nil:
			reserved = append(reserved, r)
			if !decs[i].Allowed && (refused < 0 || decs[i].RetryAfter > decs[refused].RetryAfter) {
				refused = i
			}
		}
	}
	if err := errors.Join(errs...); err != nil || refused >= 0 {
		_ = settle(ctx, ticket, reserved, false)
		if refused >= 0 {
			return decs[refused], nil
		}
		return otp.Decision{}, err
	}
	var d otp.Decision
	have := false
	add := func(x otp.Decision) {
		if have {
			x = merged(x, d, true, nil)
		}
		d, have = x, true
	}
	for i, r := range cut {
		fd, err := l.d.fallbackAllow(ctx, ticket, r)
		if err != nil || !fd.Allowed {
			_ = settle(ctx, ticket, reserved, false)
			l.refundFallbacks(ctx, ticket, cut[:i])
			return fd, err
		}
		add(fd)
	}
	if err := settle(ctx, ticket, reserved, true); err != nil {
		_ = settle(ctx, ticket, reserved, false)
		l.refundFallbacks(ctx, ticket, cut)
		return otp.Decision{}, err
	}
	for i := range remotes {
		if errs[i] == nil && decs[i].Allowed {
			add(decs[i])
		}
	}
	return d, nil
}

// settle commits or releases reservations in several regions at once.
func settle(ctx context.Context, ticket string, parts []part, commit bool) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, r := range parts {
		wg.Go(func() {
			if commit {
				errs[i] = r.store.Limiter.Commit(ctx, ticket, r.subjects)
			} else {
				errs[i] = r.store.Limiter.Release(sctx, ticket, r.subjects)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// refundFallbacks takes back ledger admissions of a request refused after
// them; their carried entries stay counted (never admits more).
func (l limiter) refundFallbacks(ctx context.Context, ticket string, parts []part) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for _, r := range parts {
		if err := l.d.local.Limiter.Refund(rctx, ticket, l.d.fallbackSubjects(r)); err != nil {
			l.d.o.Log.WarnContext(ctx, "fallback admission not refunded; it stays counted", "err", err)
		}
	}
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
	if subjects != nil {
		d.Policies = ratelimit.PoliciesOf(subjects)
	}
	return d
}

func (l limiter) Refund(ctx context.Context, ticket string, subjects []otp.Subject) error {
	local, remotes := l.split(subjects, true)
	var errs []error
	if len(local) > 0 {
		errs = append(errs, l.d.local.Limiter.Refund(ctx, ticket, local))
	}
	for _, r := range remotes {
		errs = append(errs, l.refundHome(ctx, ticket, r))
	}
	return errors.Join(errs...)
}

// Status reads each subject where it lives (its current home), in the
// subjects' order.
func (l limiter) Status(ctx context.Context, subjects []otp.Subject) ([]otp.Window, error) {
	local, remotes := l.split(subjects, false)
	if len(remotes) == 0 {
		return l.d.local.Limiter.Status(ctx, local)
	}
	byKey := map[string][]otp.Window{}
	for _, p := range append([]part{{l.d.local, local}}, remotes...) {
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

// Reset clears each subject wherever it is counted (and the fallback
// ledger's share).
func (l limiter) Reset(ctx context.Context, subjects []otp.Subject) error {
	local, remotes := l.split(subjects, true)
	for _, r := range remotes {
		if err := r.store.Limiter.Reset(ctx, r.subjects); err != nil {
			return fmt.Errorf("region %s: %w", r.store.Name, err)
		}
		if l.d.o.Fallback > 0 {
			local = append(local, l.d.fallbackSubjects(r)...)
		}
	}
	return l.d.local.Limiter.Reset(ctx, local)
}

// releaseLocal gives back a reservation of this region's subjects whose
// send the home refused or could not decide; one that fails expires with
// its lease.
func (d *Deployment) releaseLocal(ctx context.Context, ticket string, local []otp.Subject) {
	if len(local) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := d.local.Limiter.Release(ctx, ticket, local); err != nil {
		d.o.Log.WarnContext(ctx, "local reservation not released; it expires with its lease", "err", err)
	}
}
