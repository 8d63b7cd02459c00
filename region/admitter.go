package region

import (
	"context"
	"errors"
	"sync"
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
	// Undo takes back what an admission counted and stored there, when
	// this region's own commit failed after it.
	Undo(ctx context.Context, adm otp.Admission, got otp.Admitted) error
}

// admitter makes a send to a number homed in another region cost one
// cross-region round trip: the local subjects (the address windows, the
// caller's pumping groups) are reserved here first, so a local refusal
// never crosses; then one composed script call at the home (on a Cluster
// home, one per slot, all at once) claims the idempotency scope, decides
// the number's windows and the destination's pumping group and issues the
// code; then the local reservation is committed, or released. A send whose
// parts all live here is the single region's one call (one per slot on a
// Cluster). While the number's country is being moved, the previous
// home's windows are decided at the same time (see moving), with an
// Idempotency-Key too. A home out of reach, with a fallback allowed, gets
// the same composed call run here instead (fallback): the same parts over
// the fallback ledger's windows and the fallback stores. Every other send
// (a caller signal this region does not know, a keyed send refused here,
// a home out of reach during a move) goes to inTurn, the parts asked one
// by one; a claim the first try took is this request's, and claim.lua
// lets the same ticket claim it again in turn.
type admitter struct {
	d     *Deployment
	guard *pumping.Guard
	local otp.SendAdmitter
	homes map[string]HomeAdmitter
	// fallback runs a home's composed call on this region's Redis: over
	// the fallback ledger's windows (fallbackSubjects) and the fallback
	// code and idempotency stores (Options.FallbackCodes,
	// FallbackIdempotency). Nil: a home out of reach is asked in turn.
	fallback HomeAdmitter
	inTurn   otp.SendAdmitter
}

// errInTurn says a send is not for one step: Admit hands it to inTurn,
// holding nothing but a claim the first try may have taken.
var errInTurn = errors.New("region: admit in turn")

var _ otp.SendAdmitter = admitter{}

// Admitter is the deployment's otp.SendAdmitter. local admits a send whose
// parts all live here (nil: asked in turn); homes holds, by region name,
// the admitter of each other region; fallback is the same composed call
// on this region's Redis over the fallback stores (nil: asked in turn);
// inTurn admits every other send, over the deployment's parts
// (admission.InTurn).
func (d *Deployment) Admitter(guard *pumping.Guard, local otp.SendAdmitter, homes map[string]HomeAdmitter, fallback HomeAdmitter,
	inTurn otp.SendAdmitter) otp.SendAdmitter {
	return admitter{d: d, guard: guard, local: local, homes: homes, fallback: fallback, inTurn: inTurn}
}

// route finds where the send's parts live: with ok, all here (home.store
// nil) or the number's at one remote home; while the number's country is
// being moved, prev is its previous home's part when that is another
// region (its windows only: the code, the scope and the pumping record live
// in the new home). A previous home here rides in local.
func (a admitter) route(adm otp.Admission) (local []otp.Subject, home, prev part, ok bool) {
	e164 := adm.Phone.E164
	moving := a.d.previousOfNumber(e164)
	for _, s := range adm.Subjects {
		if p := a.d.previous(s.Country); s.Country != "" && p != nil && p != moving {
			return nil, part{}, part{}, false
		}
	}
	want := a.d.homeOfNumber(e164)
	if a.d.home(adm.Phone.Country()) != want {
		return nil, part{}, part{}, false
	}
	local, remotes := limiter{a.d}.split(adm.Subjects, true)
	for _, r := range remotes {
		switch r.store {
		case want:
			home = r
		case moving:
			prev = r
		default:
			return nil, part{}, part{}, false
		}
	}
	// The code, the scope and the pumping record must live at home too.
	return local, home, prev, (want == a.d.local) == (home.store == nil)
}

// undoer is a composed admitter that can take an admission back.
type undoer interface {
	Undo(ctx context.Context, adm otp.Admission, got otp.Admitted) error
}

// Admit admits a send in one step where its parts allow, else in turn.
func (a admitter) Admit(ctx context.Context, adm otp.Admission) (otp.Admitted, error) {
	got, err := a.admit(ctx, adm)
	if errors.Is(err, errInTurn) {
		return a.inTurn.Admit(ctx, adm)
	}
	return got, err
}

func (a admitter) admit(ctx context.Context, adm otp.Admission) (otp.Admitted, error) {
	out := otp.Admitted{Claim: otp.Claimed}
	local, home, prev, ok := a.route(adm)
	switch {
	case ok && home.store == nil && a.local != nil && prev.store == nil:
		return a.local.Admit(ctx, adm) // one primary here: one call, as in one region
	case ok && home.store == nil && a.local != nil:
		if u, can := a.local.(undoer); can {
			return a.moving(ctx, adm, prev, a.local.Admit, u)
		}
		return out, errInTurn
	case !ok || home.store == nil || a.homes[home.store.Name] == nil:
		return out, errInTurn
	}
	ha := a.homes[home.store.Name]
	here := a.d.local.Limiter
	var dl otp.Decision
	if len(local) > 0 {
		var err error
		if dl, err = here.Reserve(ctx, adm.Ticket, local); err != nil {
			return out, err
		}
		if !dl.Allowed {
			if adm.Scope != "" {
				return out, errInTurn // claim first, as in turn
			}
			dl.Policies = ratelimit.PoliciesOf(adm.Subjects)
			out.Decision, out.Limited = dl, true
			return out, nil
		}
	}
	release := func() { a.d.releaseLocal(ctx, adm.Ticket, local) }
	decision, got, done, err := a.decide(ctx, adm, release)
	if done {
		return got, err
	}
	homeAdm := adm
	homeAdm.Subjects = home.subjects
	got, err = a.moving(ctx, homeAdm, prev, func(ctx context.Context, adm otp.Admission) (otp.Admitted, error) {
		return ha.AdmitDecided(ctx, adm, decision)
	}, ha)
	fellBack := false
	if err != nil && prev.store == nil && a.fallback != nil && a.d.fallsBack(home.store, err) {
		a.d.o.Log.WarnContext(ctx, "home region out of reach; deciding here, from the fallback ledger", "home", home.store.Name, "err", err)
		// Decided afresh, as in turn: the failed try may have read (and
		// released) the first decision.
		decision.Abandon(ctx)
		if decision, got, done, err = a.decide(ctx, adm, release); done {
			return got, err
		}
		ha, homeAdm.Subjects, fellBack = a.fallback, a.d.fallbackSubjects(home), true
		got, err = ha.AdmitDecided(ctx, homeAdm, decision)
	}
	decision.Abandon(ctx) // unless read: the script stopped before it
	if err != nil {
		release()
		if !fellBack && a.d.fallsBack(home.store, err) {
			a.d.o.Log.WarnContext(ctx, "home region out of reach; asking in turn, from the fallback ledger", "home", home.store.Name, "err", err)
			return got, errInTurn
		}
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
		if prev.store != nil {
			errs = append(errs, prev.store.Limiter.Refund(uctx, adm.Ticket, prev.subjects))
		}
		return got, errors.Join(errs...)
	}
	if fellBack {
		if err := a.d.carryHome(ctx, adm.Ticket, home, got.Decision.Now); err != nil {
			return undo(err)
		}
	}
	if len(local) > 0 {
		if err := here.Commit(ctx, adm.Ticket, local); err != nil {
			return undo(err)
		}
	}
	got.Decision = merged(dl, got.Decision, len(local) > 0, adm.Subjects)
	return got, nil
}

// decide prepares the pumping decision of a send homed elsewhere
// (pumping.Guard.HomeDecision: the caller's groups decided here). With
// done the send ends here, its local reservation released: refused by
// the caller's groups, or handed to inTurn (a keyed send, so that its
// replay is answered first; a caller signal this region does not know).
func (a admitter) decide(ctx context.Context, adm otp.Admission, release func()) (d pumping.Decision, out otp.Admitted, done bool, err error) {
	out = otp.Admitted{Claim: otp.Claimed}
	if !adm.Pumping {
		return d, out, false, nil
	}
	if d, err = a.guard.HomeDecision(ctx, adm.Phone, adm.ClientIP, adm.Bypass); err != nil {
		release()
		if errors.Is(err, pumping.ErrSeveralCalls) {
			return d, out, true, errInTurn
		}
		return d, out, true, err
	}
	if d.RefusedHere() {
		release()
		if adm.Scope != "" {
			return d, out, true, errInTurn
		}
		out.Pumping, err = d.Read(ctx, nil)
		return d, out, true, err
	}
	return d, out, false, nil
}

// moving runs admit, and while the number's country is being moved decides
// its windows in the previous home at the same time (prev.store non-nil),
// for good: the send is admitted only when both admit, and what one
// counted is taken back when the other refuses or fails. One round trip
// of latency, as over a Cluster's slots; no window holds more than its max
// in either home. A previous home out of reach hands the send to the path
// asked in turn (its fallback), holding nothing but the claim, which the
// same request claims again there.
//
// The idempotency claim lives in the new home only, so a duplicate in
// flight, stopped there by the claim, still counts in the previous home's
// windows for the round trip before its refund: a request whose number has
// no more room there than it has duplicates in flight may be refused by
// them (it answers 429 and gives up its claim; a duplicate then claims
// and sends). Never an admission too many, never a second text
// (docs/regions.md, "A move, as built").
func (a admitter) moving(ctx context.Context, adm otp.Admission, prev part,
	admit func(context.Context, otp.Admission) (otp.Admitted, error), u undoer) (otp.Admitted, error) {
	if prev.store == nil {
		return admit(ctx, adm)
	}
	var (
		got     otp.Admitted
		err     error
		dp      otp.Decision
		perr    error
		wg      sync.WaitGroup
		subject = adm.Subjects
	)
	wg.Go(func() { got, err = admit(ctx, adm) })
	dp, perr = prev.store.Limiter.Allow(ctx, adm.Ticket, prev.subjects)
	wg.Wait()
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	whole := err == nil && got.Claim == otp.Claimed && got.Limited && got.Decision.Allowed && got.Pumping.Refused == nil && got.Issued
	if perr == nil && dp.Allowed && !whole {
		if rerr := prev.store.Limiter.Refund(uctx, adm.Ticket, prev.subjects); rerr != nil {
			a.d.o.Log.WarnContext(ctx, "previous home's windows not refunded; the quota stays used", "home", prev.store.Name, "err", rerr)
		}
	}
	if err != nil || !whole {
		return got, err
	}
	if perr != nil || !dp.Allowed {
		if uerr := u.Undo(uctx, adm, got); uerr != nil {
			a.d.o.Log.WarnContext(ctx, "taking a send back from its new home failed; the quota stays used", "err", uerr)
		}
		if perr != nil {
			if a.d.fallsBack(prev.store, perr) {
				return otp.Admitted{Claim: otp.Claimed}, errInTurn
			}
			return otp.Admitted{Claim: otp.Claimed}, perr
		}
		dp.Policies = ratelimit.PoliciesOf(subject)
		return otp.Admitted{Claim: got.Claim, Decision: dp, Limited: true}, nil
	}
	got.Decision = merged(dp, got.Decision, true, nil)
	return got, nil
}
