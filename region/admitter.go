package region

import (
	"context"
	"errors"
	"fmt"
	"time"

	"smsgw/otp"
	"smsgw/pumping"
	"smsgw/ratelimit"
)

// HomeAdmitter runs, in one region's Redis, a send's parts that live there
// as one script call (admission.Admitter on a single primary or Sentinel;
// admission.ClusterAdmitter on a Cluster: one call per slot, the slots at
// once, so one round trip of latency), with the pumping decision this
// region prepared.
type HomeAdmitter interface {
	AdmitDecided(ctx context.Context, adm otp.Admission, d pumping.Decision) (otp.Admitted, error)
	// AdmitRefused answers a send this region refused before asking the
	// home: a keyed one claims there first (a composed call of the claim
	// part alone), so that a replay is answered before the refusal.
	AdmitRefused(ctx context.Context, adm otp.Admission, refused otp.Admitted) (otp.Admitted, error)
	// Undo takes back what an admission counted and stored there, when
	// this region's own commit failed after it.
	Undo(ctx context.Context, adm otp.Admission, got otp.Admitted) error
}

// admitter makes a send to a number homed in another region cost one
// cross-region round trip: the local subjects (the address windows, the
// caller's pumping groups) are reserved here first, so a local refusal
// never crosses (a keyed one only claims at home); then one composed
// script call at the home (on a Cluster home, one per slot, all at once)
// claims the idempotency scope, decides the number's windows and the
// destination's pumping group and issues the code; then the local
// reservation is committed, or released. A send whose parts all live here
// is the single region's one call (one per slot on a Cluster). While the
// number's country is being moved, the previous home's windows are
// decided at the same time (see moving). A home out of reach, with a
// fallback allowed, gets the same composed call run here instead
// (fallback): the same parts over the fallback ledger's windows and the
// fallback stores; a previous home out of reach gets its windows decided
// on that ledger.
type admitter struct {
	d     *Deployment
	guard *pumping.Guard
	local LocalAdmitter
	homes map[string]HomeAdmitter
	// fallback runs a home's composed call on this region's Redis: over
	// the fallback ledger's windows (fallbackSubjects) and the fallback
	// code and idempotency stores (Options.FallbackCodes,
	// FallbackIdempotency). Nil: a home out of reach fails closed.
	fallback HomeAdmitter
}

// LocalAdmitter admits a send whose parts all live here in one composed
// call, and takes it back when a previous home refuses during a move.
type LocalAdmitter interface {
	otp.SendAdmitter
	undoer
}

var _ otp.SendAdmitter = admitter{}

// Admitter is the deployment's otp.SendAdmitter. local admits a send whose
// parts all live here; homes holds, by region name, the admitter of each
// other region; fallback is the same composed call on this region's Redis
// over the fallback stores (nil: fail closed).
func (d *Deployment) Admitter(guard *pumping.Guard, local LocalAdmitter, homes map[string]HomeAdmitter, fallback HomeAdmitter) otp.SendAdmitter {
	return admitter{d: d, guard: guard, local: local, homes: homes, fallback: fallback}
}

// route finds where the send's parts live. local are the windows kept
// here; home is the number's home when it is another region (home.store
// nil: here), which holds its claim, code and pumping record even when
// none of its windows is configured; others are the windows of other
// homes, decided there for good (see moving): the previous home's while
// the number's country is being moved (a previous home here rides in
// local), or, never for otp's subjects (each homed one is the number's),
// another country's.
func (a admitter) route(adm otp.Admission) (local []otp.Subject, home part, others []part) {
	want := a.d.homeOfNumber(adm.Phone.E164)
	local, remotes := limiter{a.d}.split(adm.Subjects, true)
	for _, r := range remotes {
		if r.store == want {
			home = r
		} else {
			others = append(others, r)
		}
	}
	if want != a.d.local {
		home.store = want
	}
	return local, home, others
}

// undoer is a composed admitter that can take an admission back.
type undoer interface {
	Undo(ctx context.Context, adm otp.Admission, got otp.Admitted) error
}

// Admit admits a send: one composed call at the number's home (see
// admitter).
func (a admitter) Admit(ctx context.Context, adm otp.Admission) (otp.Admitted, error) {
	out := otp.Admitted{Claim: otp.Claimed}
	local, home, others := a.route(adm)
	if home.store == nil {
		adm.Subjects = local // all here but others': one call, as in one region
		return a.moving(ctx, adm, others, a.local.Admit, a.local)
	}
	ha := a.homes[home.store.Name]
	if ha == nil {
		return out, fmt.Errorf("region: no admitter for region %s", home.store.Name)
	}
	claimAt := func(ha HomeAdmitter, home *Store) func(otp.Admitted) (otp.Admitted, error) {
		return func(refused otp.Admitted) (otp.Admitted, error) {
			return a.claimRefused(ctx, adm, home, ha, refused)
		}
	}
	here := a.d.local.Limiter
	var dl otp.Decision
	if len(local) > 0 {
		var err error
		if dl, err = here.Reserve(ctx, adm.Ticket, local); err != nil {
			return out, err
		}
		if !dl.Allowed {
			dl.Policies = ratelimit.PoliciesOf(adm.Subjects)
			out.Decision, out.Limited = dl, true
			return claimAt(ha, home.store)(out)
		}
	}
	release := func() { a.d.releaseLocal(ctx, adm.Ticket, local) }
	decision, got, done, err := a.decide(ctx, adm, release, claimAt(ha, home.store))
	if done {
		return got, err
	}
	homeAdm := adm
	homeAdm.Subjects = home.subjects
	admitAt := func(ha HomeAdmitter, decision pumping.Decision) func(context.Context, otp.Admission) (otp.Admitted, error) {
		return func(ctx context.Context, adm otp.Admission) (otp.Admitted, error) {
			return ha.AdmitDecided(ctx, adm, decision)
		}
	}
	got, err = a.moving(ctx, homeAdm, others, admitAt(ha, decision), ha)
	fellBack := false
	if err != nil && a.fallback != nil && a.d.fallsBack(home.store, err) {
		a.d.o.Log.WarnContext(ctx, "home region out of reach; deciding here, from the fallback ledger", "home", home.store.Name, "err", err)
		// Decided afresh: the failed try may have read (and released)
		// the first decision.
		decision.Abandon(ctx)
		if decision, got, done, err = a.decide(ctx, adm, release, claimAt(a.fallback, nil)); done {
			return got, err
		}
		ha, homeAdm.Subjects, fellBack = a.fallback, a.d.fallbackSubjects(home), true
		got, err = a.moving(ctx, homeAdm, others, admitAt(ha, decision), ha)
	}
	decision.Abandon(ctx) // unless read: the script stopped before it
	if err != nil {
		release()
		return got, err
	}
	if got.Claim != otp.Claimed || (got.Limited && !got.Decision.Allowed) || got.Pumping.Refused != nil || !got.Issued {
		release()
		if got.Limited && !got.Decision.Allowed {
			got.Decision.Policies = ratelimit.PoliciesOf(adm.Subjects)
		}
		return got, nil
	}
	undo := func(err error) (otp.Admitted, error) {
		release()
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		errs := []error{err, ha.Undo(uctx, homeAdm, got)}
		for _, o := range others {
			errs = append(errs, limiter{a.d}.refundHome(uctx, adm.Ticket, o))
		}
		return got, errors.Join(errs...)
	}
	if fellBack && len(home.subjects) > 0 {
		if err := a.d.carryHome(ctx, adm.Ticket, home, got.Decision.Now); err != nil {
			return undo(err)
		}
	}
	if len(local) > 0 {
		if err := here.Commit(ctx, adm.Ticket, local); err != nil {
			return undo(err)
		}
		if len(home.subjects)+len(others) == 0 {
			got.Decision = dl // no window elsewhere: the local ones bound the send
		}
	}
	got.Decision = merged(dl, got.Decision, len(local) > 0, adm.Subjects)
	return got, nil
}

// claimRefused answers a send refused here (HomeAdmitter.AdmitRefused) at
// ha, home's; home out of reach, on the fallback stores, as the
// deployment's idempotency store claims (home nil: ha is the fallback).
func (a admitter) claimRefused(ctx context.Context, adm otp.Admission, home *Store, ha HomeAdmitter, refused otp.Admitted) (otp.Admitted, error) {
	got, err := ha.AdmitRefused(ctx, adm, refused)
	if err != nil && home != nil && a.fallback != nil && a.d.fallsBack(home, err) {
		return a.fallback.AdmitRefused(ctx, adm, refused)
	}
	return got, err
}

// decide prepares the pumping decision of a send homed elsewhere
// (pumping.Guard.HomeDecision: the caller's groups decided here). With
// done the send ends here, its local reservation released: refused by the
// caller's groups (a keyed send once claimed, so that its replay is
// answered first).
func (a admitter) decide(ctx context.Context, adm otp.Admission, release func(),
	claim func(otp.Admitted) (otp.Admitted, error)) (d pumping.Decision, out otp.Admitted, done bool, err error) {
	out = otp.Admitted{Claim: otp.Claimed}
	if !adm.Pumping {
		return d, out, false, nil
	}
	if d, err = a.guard.HomeDecision(ctx, adm.Phone, adm.ClientIP, adm.Bypass); err != nil {
		release()
		return d, out, true, err
	}
	if d.RefusedHere() {
		release()
		if out, err = claim(out); err != nil || out.Claim != otp.Claimed {
			return d, out, true, err
		}
		out.Pumping, err = d.Read(ctx, nil)
		return d, out, true, err
	}
	return d, out, false, nil
}
