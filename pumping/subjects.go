package pumping

import (
	"net/netip"
	"strconv"
	"strings"

	"smsgw/otp"
)

// subject is one thing a rule counts: a number range, a country, a client
// network, the spend ledger.
type subject struct {
	rule string
	kind byte // 'r' range, 'c' country, 'n' network, 'm' money
	// id names it to people and in the hold cache: "+4479111234xx",
	// "GB", "2001:db8:1::/48", "spend".
	id string
	// key is its Redis hash; pend, for a country, its pending set.
	key, pend string
	floor     int
	price     int64
}

// group is a set of subjects sharing one hash tag, so one script call can
// decide and count them atomically even on Redis Cluster.
type group struct {
	record   string // the phone's record, for the destination group
	subjects []subject
}

func (g *group) keys() []string {
	keys := make([]string, 0, len(g.subjects)+2)
	if g.record != "" {
		keys = append(keys, g.record)
	}
	for _, s := range g.subjects {
		keys = append(keys, s.key)
		if s.kind == 'c' {
			keys = append(keys, s.pend)
		}
	}
	return keys
}

// countryOf names the numbers of no country ("001" is phonenumbers' region
// for the international networks) so they cannot slip past the country rule.
func countryOf(p otp.Phone) string {
	if c := p.Country(); c != "" {
		return c
	}
	return "ZZ"
}

// destination lists the phone's ranges and country, under the country's
// hash tag. A range never reaches into the country code: a block shorter
// than the code plus one digit would span countries.
func (g *Guard) destination(p otp.Phone) group {
	c := countryOf(p)
	tag := g.prefix + "pump:{d:" + c + "}:"
	digits := p.E164[1:]
	cc := callingCodeLen(p)
	out := group{record: tag + "p:" + p.E164}
	for _, rule := range []string{RuleRange100, RuleRange1k, RuleRange10k, RuleRange100k} {
		floor := g.cfg.Floors[rule]
		drop := rangeDigits[rule]
		if floor <= 0 || len(digits)-drop <= cc {
			continue
		}
		block := digits[:len(digits)-drop]
		out.subjects = append(out.subjects, subject{rule: rule, kind: 'r', floor: floor,
			id: "+" + block + strings.Repeat("x", drop), key: tag + "r:" + block})
	}
	if floor := g.cfg.Floors[RuleCountry]; floor > 0 {
		out.subjects = append(out.subjects, subject{rule: RuleCountry, kind: 'c', floor: floor, id: c,
			key: tag + "c", pend: tag + "pend"})
	}
	return out
}

// callingCodeLen is the length of the number's country calling code.
func callingCodeLen(p otp.Phone) int {
	if cc := p.CallingCode(); cc > 0 {
		return len(strconv.Itoa(cc))
	}
	return 1
}

// caller lists the client's networks, under the hash tag of the widest one
// (every narrower network of an address lies inside it).
func (g *Guard) caller(ip netip.Addr) group {
	ip = ip.Unmap().WithZone("")
	if !ip.IsValid() {
		return group{}
	}
	var levels []struct {
		rule string
		bits int
	}
	if ip.Is4() {
		levels = []struct {
			rule string
			bits int
		}{{RuleNet24, 24}, {RuleNet32, 32}}
	} else {
		levels = []struct {
			rule string
			bits int
		}{{RuleNet48, 48}, {RuleNet56, 56}, {RuleNet64, 64}}
	}
	widest, _ := ip.Prefix(levels[0].bits)
	tag := g.prefix + "pump:{n:" + widest.String() + "}:"
	var out group
	for _, l := range levels {
		floor := g.cfg.Floors[l.rule]
		if floor <= 0 {
			continue
		}
		p, _ := ip.Prefix(l.bits)
		id := p.String()
		if l.bits == 32 {
			id = ip.String()
		}
		out.subjects = append(out.subjects, subject{rule: l.rule, kind: 'n', floor: floor, id: id, key: tag + strconv.Itoa(l.bits) + ":" + id})
	}
	return out
}

// networkID is what a phone's record keeps of the caller, for crediting an
// approval: the narrowest network the rules count.
func networkID(ip netip.Addr) string {
	ip = ip.Unmap().WithZone("")
	if !ip.IsValid() {
		return ""
	}
	if ip.Is4() {
		return ip.String()
	}
	p, _ := ip.Prefix(64)
	return p.Addr().String()
}

// spend is the money ledger's group, when a budget is set.
func (g *Guard) spend(p otp.Phone) group {
	if !g.cfg.Spend.On() {
		return group{}
	}
	return group{subjects: []subject{{rule: RuleSpendDay, kind: 'm', id: "spend",
		key: g.prefix + "pump:{spend}", price: g.cfg.Spend.price(countryOf(p))}}}
}

// scope is a rule's family, as a refusal's scope names it.
func scope(rule string) string {
	switch {
	case strings.HasPrefix(rule, "range_"):
		return "range"
	case strings.HasPrefix(rule, "net_"):
		return "network"
	case strings.HasPrefix(rule, "spend"):
		return "spend"
	default:
		return rule
	}
}
