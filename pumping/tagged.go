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
// their own, one per slot, in parallel (package sendscript). Its
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
	sig := d.signal(calls, errs)
	for i, c := range calls {
		if errs[i] == nil && c.reply.verdict == verdictAskAgain {
			calls[i], errs[i] = d.g.decide(ctx, d.groups[i], d.phone, d.netid, d.mode, signalArg(sig))
		}
	}
	return d.g.conclude(ctx, d.phone, d.mode, calls, errs)
}

// Abandon takes back what the calls counted, when the send is refused by
// another part (a window) or failed: replies[i] nil when call i did not
// run.
func (d TagDecisions) Abandon(ctx context.Context, replies []any) {
	calls, errs := d.read(replies)
	d.signal(calls, errs)
	var counted []call
	for i, c := range calls {
		if errs[i] == nil && (c.reply.verdict == verdictCounted || c.reply.verdict == verdictShadow) {
			counted = append(counted, c)
		}
	}
	if len(counted) == 0 {
		return
	}
	res := otp.PumpingReservation{Ticket: &reservation{phone: d.phone.E164, calls: counted}}
	if err := d.g.Release(context.WithoutCancel(ctx), res); err != nil {
		d.g.log.WarnContext(ctx, "releasing an abandoned pumping reservation failed", "err", err)
	}
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

// signal remembers what the caller's group said of its networks' signal.
func (d TagDecisions) signal(calls []call, errs []error) int64 {
	sig := int64(-1)
	for i, c := range calls {
		if errs[i] == nil && d.groups[i].record == "" && c.reply.signal >= 0 {
			sig = c.reply.signal
			d.g.noteSignal(d.ip, countryOf(d.phone), sig, d.now)
		}
	}
	return sig
}

var errNotRun = errors.New("pumping: decide: the call did not run")
