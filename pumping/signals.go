package pumping

import (
	"net/netip"
	"time"

	"smsgw/otp"
)

// signalFor is what a call tells decide.lua of the caller networks'
// signal: in one merged call it reads them itself; when the groups are
// called apart (Cluster, or a number homed in another region) the
// destination's call is told what this replica last heard, or "?".
func (g *Guard) signalFor(grp group, split bool, ip netip.Addr, now time.Time) string {
	if !(split || g.cluster) || grp.record == "" {
		return ""
	}
	k := signalKey(ip)
	if _, ok := g.netSignal.get("+"+k, now); ok {
		return "1"
	}
	if _, ok := g.netSignal.get("-"+k, now); ok {
		return "0"
	}
	return "?"
}

// signalTTL is how long a replica trusts what it heard of a network's
// signal.
const signalTTL = time.Minute

func (g *Guard) noteSignal(ip netip.Addr, sig int64, now time.Time) {
	k := signalKey(ip)
	switch sig {
	case 1:
		g.netSignal.drop("-" + k)
		g.netSignal.put("+"+k, otp.PumpingRefusal{RetryAfter: signalTTL}, now, signalTTL)
	case 0:
		g.netSignal.drop("+" + k)
		g.netSignal.put("-"+k, otp.PumpingRefusal{RetryAfter: signalTTL}, now, signalTTL)
	}
}
