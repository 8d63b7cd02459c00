package pumping

import (
	"context"
	"errors"
	"net/netip"
	"time"

	"smsgw/otp"
)

// TagCall is one hash tag's decide.lua call of a send on Redis Cluster.
type TagCall struct {
	Keys []string
	Args []any
}

// TagDecisions is Reserve's decision on Redis Cluster prepared as one
// decide.lua call per hash tag, for scripts that run decide.lua inside
// their own, one per slot, in parallel (package admission). Its
// reservation is the one Reserve makes: Release takes it back.
type TagDecisions struct {
	g      *Guard
	phone  otp.Phone
	ip     netip.Addr
	mode   decideMode
	netid  string
	now    time.Time
	groups []group
	// Calls are the groups' calls, in Read's order.
	Calls []TagCall
}

// TagDecisions prepares the decision as Reserve's calls on Cluster: the
// destination group carries the caller's signal this replica remembers
// ("?" when none: a restricted country then asks again, see Read).
func (g *Guard) TagDecisions(ctx context.Context, phone otp.Phone, ip netip.Addr, bypass bool) TagDecisions {
	d := TagDecisions{g: g, phone: phone, ip: ip, mode: g.mode(bypass), netid: networkID(ip), now: g.nowCtx(ctx)}
	d.groups = g.groups(phone, ip)
	d.Calls = make([]TagCall, len(d.groups))
	for i, grp := range d.groups {
		signal := g.signalFor(grp, true, ip, countryOf(phone), d.now)
		if len(d.groups) == 1 {
			signal = "" // no caller call to ask: the country decides alone
		}
		d.Calls[i] = TagCall{grp.keys(), g.decideArgs(ctx, grp, phone, d.netid, d.mode, signal).argv()}
	}
	return d
}

// Read reads the calls' replies (in Calls' order) into the reservation, as
// Reserve does: a destination group that asked again for the caller's
// signal is asked again here (a second call, only then), and a refusal or
// failure of one group takes back what the others counted.
func (d TagDecisions) Read(ctx context.Context, replies []any) (otp.PumpingReservation, error) {
	calls, errs := d.read(replies)
	d.g.askAgain(ctx, d.groups, calls, errs, d.phone, d.ip, d.netid, d.mode, d.now)
	return d.g.conclude(ctx, d.phone, d.mode, calls, errs)
}

// Abandon takes back what the calls counted, when the send is refused by
// another part (a window) or failed: replies[i] nil when call i did not
// run.
func (d TagDecisions) Abandon(ctx context.Context, replies []any) {
	calls, errs := d.read(replies)
	d.g.noteCallerSignal(calls, errs, d.phone, d.ip, d.now)
	d.g.releaseCounted(ctx, d.phone, calls, errs, "releasing an abandoned pumping reservation failed")
}

func (d TagDecisions) read(replies []any) ([]call, []error) {
	calls, errs := make([]call, len(d.groups)), make([]error, len(d.groups))
	for i, grp := range d.groups {
		if i < len(replies) && replies[i] != nil {
			calls[i], errs[i] = readCall(grp, d.phone, replies[i])
		} else {
			errs[i] = errNotRun
		}
	}
	return calls, errs
}

var errNotRun = errors.New("pumping: decide: the call did not run")
