package pumping

import (
	"net/netip"
	"time"

	"smsgw/otp"
)

// The caller networks' signal for a destination country, as decide.lua
// reports it (reply) and is told it (ARGV).
const (
	signalNone   = 0 // no level good: the send counts in the country
	signalGood   = 1 // a level's codes to the country are approved
	signalAbroad = 2 // none good, a level known for approvals elsewhere
)

// signalArg is a reported signal as decide.lua's ARGV[13] takes it.
func signalArg(sig int64) string {
	switch sig {
	case signalGood:
		return "1"
	case signalAbroad:
		return "2"
	}
	return "0"
}

// signalFor is what a call tells decide.lua of the caller networks'
// signal: in one merged call it reads them itself; when the groups are
// called apart (Cluster, or a number homed in another region) the
// destination's call is told what this replica last heard of that network
// and country, or "?" (then a send counts in the country's own ledger
// unless it is refused, which asks again with the caller's answer).
func (g *Guard) signalFor(grp group, split bool, ip netip.Addr, country string, now time.Time) string {
	if !(split || g.cluster) || grp.record == "" {
		return ""
	}
	k := signalKey(ip) + " " + country
	if _, ok := g.netSignal.get("+"+k, now); ok {
		return "1"
	}
	if _, ok := g.netSignal.get("~"+wideKey(ip)+" "+country, now); ok {
		return "2"
	}
	if _, ok := g.netSignal.get("-"+k, now); ok {
		return "0"
	}
	return "?"
}

// How long a replica trusts what it heard of a network's signal: a narrow
// network's approvals change from minute to minute; what a wide one is
// known for (its users' country) changes slowly, and a spread from
// proxies abroad rotates over narrow networks, so remembering the wide one
// longer is what lets a Cluster send from a new /24 count apart at once.
const (
	signalTTL = time.Minute
	abroadTTL = 10 * time.Minute
)

func (g *Guard) noteSignal(ip netip.Addr, country string, sig int64, now time.Time) {
	k := signalKey(ip) + " " + country
	switch sig {
	case signalGood:
		g.netSignal.drop("-" + k)
		g.netSignal.drop("~" + wideKey(ip) + " " + country)
		g.netSignal.put("+"+k, otp.PumpingRefusal{RetryAfter: signalTTL}, now, signalTTL)
	case signalAbroad:
		g.netSignal.drop("+" + k)
		g.netSignal.put("~"+wideKey(ip)+" "+country, otp.PumpingRefusal{RetryAfter: abroadTTL}, now, abroadTTL)
	case signalNone:
		g.netSignal.drop("+" + k)
		g.netSignal.drop("~" + wideKey(ip) + " " + country)
		g.netSignal.put("-"+k, otp.PumpingRefusal{RetryAfter: signalTTL}, now, signalTTL)
	}
}
