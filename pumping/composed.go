package pumping

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"smsgw/internal/luascript"
	"smsgw/otp"
)

// DecideLua is decide.lua, for a script that runs it inside its own with a
// send's other parts (package admission).
func DecideLua() string { return luascript.Source(luaFiles, "decide.lua", fieldsLua) }

// DecideStops is, as a Lua expression over decide.lua's reply r, whether
// it ends a composed send: refused, or (unless tagged, one Cluster slot's
// call, whose Go side asks again itself) a restricted country asking again
// for the caller's signal.
var DecideStops = fmt.Sprintf("r[1] == %d or (r[1] == %d and not tagged)", verdictRefused, verdictAskAgain)

// Decision is one send's pumping decision prepared as one decide.lua call,
// for a script that runs decide.lua inside its own. Its reservation is the
// one Reserve makes: Release takes it back.
type Decision struct {
	g     *Guard
	grp   group
	phone otp.Phone
	mode  decideMode
	// Keys and Args are decide.lua's call; both empty when no rule applies
	// (nothing to decide or count).
	Keys []string
	Args []any
	// here is what HomeDecision already decided in this region; read is
	// set once Read took it over (Abandon then has nothing to do).
	here []call
	read *bool
}

// ErrSeveralCalls says a decision cannot be one call: ask in turn
// (Reserve).
var ErrSeveralCalls = errors.New("pumping: the decision takes several calls (Cluster or several regions)")

// Decision prepares Reserve's decision as one call. It fails when the
// decision takes several (Redis Cluster, a country homed in another region).
func (g *Guard) Decision(ctx context.Context, phone otp.Phone, ip netip.Addr, bypass bool) (Decision, error) {
	groups := g.groups(phone, ip)
	d := Decision{g: g, phone: phone, mode: g.mode(bypass)}
	if len(groups) == 0 {
		return d, nil
	}
	if g.cluster || g.homeScripts(phone.Country()) != nil {
		return Decision{}, ErrSeveralCalls
	}
	d.grp = merge(groups)
	d.Keys = d.grp.keys()
	d.Args = g.decideArgs(ctx, d.grp, phone, networkID(ip), d.mode, g.signalFor(d.grp, false, ip, countryOf(phone), g.nowCtx(ctx))).argv()
	return d, nil
}

// HomeDecision prepares the decision of a send to a number homed in
// another region on one primary: the groups whose state lives here (the
// caller's networks, the spend ceiling) are decided here now, and Keys and
// Args are the destination group's call, to run in the home region inside
// its composed script. The call carries the caller's signal this region's
// reply just gave, so the home never asks again; a signal still unknown
// after that (the caller's networks' call told none) goes as "0", no
// sign, which is what Reserve tells the home when it asks again. It never
// returns ErrSeveralCalls: every send homed elsewhere is one call there.
func (g *Guard) HomeDecision(ctx context.Context, phone otp.Phone, ip netip.Addr, bypass bool) (Decision, error) {
	d := Decision{g: g, phone: phone, mode: g.mode(bypass), read: new(bool)}
	var here []group
	for _, grp := range g.groups(phone, ip) {
		if grp.record != "" {
			d.grp = grp
		} else {
			here = append(here, grp)
		}
	}
	netid, now := networkID(ip), g.nowCtx(ctx)
	signal := g.signalFor(d.grp, true, ip, countryOf(phone), now)
	if !signalLevels(here) {
		signal = "" // no network of the caller's is a sign: nothing to ask
	}
	if len(here) > 0 {
		calls, err := g.decideHere(ctx, here, phone, netid, d.mode)
		if err != nil {
			return Decision{}, err
		}
		d.here = calls
		if sig := g.noteCallerSignal(calls, nil, phone, ip, now); sig >= 0 {
			signal = signalArg(sig)
		}
		if d.RefusedHere() {
			d.grp = group{} // refused here: nothing crosses
			return d, nil
		}
	}
	if d.grp.record == "" {
		return d, nil
	}
	if signal == "?" {
		// "?" would let the home answer "ask again", which ends its
		// composed script (DecideStops); Reserve asks again with this.
		signal = signalArg(-1)
	}
	d.Keys = d.grp.keys()
	d.Args = g.decideArgs(ctx, d.grp, phone, netid, d.mode, signal).argv()
	return d, nil
}

// RefusedHere says HomeDecision refused the send from this region's own
// groups: Read(ctx, nil) answers the refusal, and nothing needs to cross.
func (d Decision) RefusedHere() bool {
	for _, c := range d.here {
		if c.reply.verdict == verdictRefused {
			return true
		}
	}
	return false
}

// decideHere decides this region's groups of a send homed elsewhere: one
// call, or on Cluster one per hash tag at once (the caller's networks and
// the spend ledger sit in different slots). A failure takes back what the
// others counted.
func (g *Guard) decideHere(ctx context.Context, here []group, phone otp.Phone, netid string, mode decideMode) ([]call, error) {
	if !g.cluster || len(here) == 1 {
		c, err := g.decide(ctx, merge(here), phone, netid, mode, "")
		if err != nil {
			return nil, err
		}
		return []call{c}, nil
	}
	calls, errs := make([]call, len(here)), make([]error, len(here))
	var wg sync.WaitGroup
	for i, grp := range here {
		wg.Go(func() { calls[i], errs[i] = g.decide(ctx, grp, phone, netid, mode, "") })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		g.releaseCounted(ctx, phone, calls, errs, "releasing a partial pumping reservation failed")
		return nil, err
	}
	return calls, nil
}

// Abandon takes back what HomeDecision counted here unless Read took it
// over: the composed call stopped before the decision, or failed.
func (d Decision) Abandon(ctx context.Context) {
	if len(d.here) == 0 || d.RefusedHere() || *d.read {
		return
	}
	d.g.releaseCounted(ctx, d.phone, d.here, nil, "releasing an abandoned pumping reservation failed")
}

// Read reads decide.lua's reply into the reservation, as Reserve would,
// with what HomeDecision decided here.
func (d Decision) Read(ctx context.Context, v any) (otp.PumpingReservation, error) {
	if d.read != nil {
		*d.read = true
	}
	// The one call on one primary: no slices to make.
	var oneCall [1]call
	var oneErr [1]error
	calls, errs := oneCall[:0], oneErr[:0]
	if len(d.here) > 0 {
		calls, errs = slices.Clone(d.here), make([]error, len(d.here), len(d.here)+1)
	}
	if d.Keys != nil {
		c, err := readCall(d.grp, d.phone, v)
		calls, errs = append(calls, c), append(errs, err)
	}
	if len(calls) == 0 {
		return otp.PumpingReservation{}, nil
	}
	return d.g.conclude(ctx, d.phone, d.mode, calls, errs)
}

// signalLevels says whether groups count a network level whose approvals
// are a sign (see Guard.caller).
func signalLevels(groups []group) bool {
	for _, grp := range groups {
		for _, s := range grp.subjects {
			if s.sub != "" {
				return true
			}
		}
	}
	return false
}
