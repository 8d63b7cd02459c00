package region

import (
	"context"
	"errors"
	"time"

	"smsgw/otp"
	"smsgw/pumping"
	"smsgw/ratelimit"
)

// HomeAdmitter runs, in one region's Redis, a send's parts that live there
// as one script call (sendscript.Admitter on a single primary or Sentinel;
// sendscript.ClusterAdmitter on a Cluster: one call per slot, the slots at
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
// Cluster). Every other send (a country being moved, a home out of reach
// with a fallback allowed, a caller signal this region does not know) is
// asked in turn, as before (otp.ErrAdmitInTurn).
type admitter struct {
	d     *Deployment
	guard *pumping.Guard
	local otp.SendAdmitter
	homes map[string]HomeAdmitter
}

var _ otp.SendAdmitter = admitter{}

// Admitter is the deployment's otp.SendAdmitter. local admits a send whose
// parts all live here (nil: asked in turn); homes holds, by region name,
// the admitter of each other region.
func (d *Deployment) Admitter(guard *pumping.Guard, local otp.SendAdmitter, homes map[string]HomeAdmitter) otp.SendAdmitter {
	return admitter{d: d, guard: guard, local: local, homes: homes}
}

// route finds where the send's parts live: with ok, all here (home.store
// nil) or the number's at one remote home.
func (a admitter) route(adm otp.Admission) (local []otp.Subject, home part, ok bool) {
	for _, s := range adm.Subjects {
		if s.Country != "" && a.d.previous(s.Country) != nil {
			return nil, part{}, false // being moved: decided in both homes
		}
	}
	local, remotes := limiter{a.d}.split(adm.Subjects, true)
	if len(remotes) > 1 || a.d.previousOfNumber(adm.Phone.E164) != nil {
		return nil, part{}, false
	}
	want := a.d.local
	if len(remotes) == 1 {
		home, want = remotes[0], remotes[0].store
	}
	// The code, the scope and the pumping record must live there too.
	return local, home, a.d.homeOfNumber(adm.Phone.E164) == want && a.d.home(adm.Phone.Country()) == want
}

func (a admitter) Admit(ctx context.Context, adm otp.Admission) (otp.Admitted, error) {
	out := otp.Admitted{Claim: otp.Claimed}
	local, home, ok := a.route(adm)
	switch {
	case ok && home.store == nil && a.local != nil:
		return a.local.Admit(ctx, adm) // one primary here: one call, as in one region
	case !ok || home.store == nil || a.homes[home.store.Name] == nil:
		return out, otp.ErrAdmitInTurn
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
				return out, otp.ErrAdmitInTurn // claim first, as in turn
			}
			dl.Policies = ratelimit.PoliciesOf(adm.Subjects)
			out.Decision, out.Limited = dl, true
			return out, nil
		}
	}
	release := func() { a.d.releaseLocal(ctx, adm.Ticket, local) }
	var decision pumping.Decision
	if adm.Pumping {
		var err error
		decision, err = a.guard.HomeDecision(ctx, adm.Phone, adm.ClientIP, adm.Bypass)
		if err != nil {
			release()
			if errors.Is(err, pumping.ErrSeveralCalls) {
				return out, otp.ErrAdmitInTurn
			}
			return out, err
		}
		if decision.RefusedHere() {
			release()
			if adm.Scope != "" {
				return out, otp.ErrAdmitInTurn
			}
			out.Pumping, err = decision.Read(ctx, nil)
			return out, err
		}
	}
	homeAdm := adm
	homeAdm.Subjects = home.subjects
	got, err := ha.AdmitDecided(ctx, homeAdm, decision)
	decision.Abandon(ctx) // unless read: the script stopped before it
	if err != nil {
		release()
		if a.d.fallsBack(home.store, err) {
			a.d.o.Log.WarnContext(ctx, "home region out of reach; asking in turn, from the fallback ledger", "home", home.store.Name, "err", err)
			return got, otp.ErrAdmitInTurn
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
	if len(local) > 0 {
		if err := here.Commit(ctx, adm.Ticket, local); err != nil {
			release()
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			return got, errors.Join(err, ha.Undo(uctx, homeAdm, got))
		}
	}
	got.Decision = merged(dl, got.Decision, len(local) > 0, adm.Subjects)
	return got, nil
}
