package pumping

import (
	"context"
	"errors"
	"net/netip"

	"smsgw/otp"
)

// DecideLua is decide.lua, for a script that runs it inside its own with a
// send's other parts (package sendscript).
func DecideLua() string { return decideSource }

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
}

var errSeveralCalls = errors.New("pumping: the decision takes several calls (Cluster or several regions)")

// Decision prepares Reserve's decision as one call. It fails when the
// decision takes several (Redis Cluster, a country homed in another region).
func (g *Guard) Decision(ctx context.Context, phone otp.Phone, ip netip.Addr, bypass bool) (Decision, error) {
	groups := g.groups(phone, ip)
	d := Decision{g: g, phone: phone, mode: g.mode(bypass)}
	if len(groups) == 0 {
		return d, nil
	}
	if g.cluster || g.homeScripts(phone.Country()) != nil {
		return Decision{}, errSeveralCalls
	}
	d.grp = merge(groups)
	d.Keys = d.grp.keys()
	d.Args = g.decideArgs(ctx, d.grp, phone, networkID(ip), d.mode, g.signalFor(d.grp, false, ip, g.nowCtx(ctx))).argv()
	return d, nil
}

// Read reads decide.lua's reply into the reservation, as Reserve would.
func (d Decision) Read(ctx context.Context, v any) (otp.PumpingReservation, error) {
	if d.Keys == nil {
		return otp.PumpingReservation{}, nil
	}
	c, err := readCall(d.grp, d.phone, v)
	return d.g.conclude(ctx, d.phone, d.mode, []call{c}, []error{err})
}
