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
	// 'r' range, 'c' country or operator (restricted, takes signs), 'n'
	// network, 'm' money
	kind byte
	// id names it to people and in the hold cache: "+4479111234xx",
	// "GB", "NG/Glo" (an operator), "2001:db8:1::/48", "spend".
	id string
	// key is its Redis hash; for a country (or an operator), challenged is the ledger of
	// sends that passed with a solved challenge, foreign the ledger of
	// unsigned sends from networks known abroad (see decide.lua) and ret
	// the hash of the returning numbers of the phone's block (see
	// returningBlock).
	key, challenged, foreign, ret string
	floor                         int
	price                         int64
	// sub, for a network level whose approvals are a sign of real users
	// (IPv4 /24 and /16, IPv6 /48 and /32), is the hash counting its texts
	// to the phone's country and their approvals: the sign is per country,
	// so a network whose users verify codes to one country lends no trust
	// to its texts to another.
	sub string
}

// arg is the subject's kind as the scripts read it: "N" is a network with
// a country ledger (two keys).
func (s subject) arg() string {
	if s.sub != "" {
		return "N"
	}
	return string(s.kind)
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
			keys = append(keys, s.challenged, s.ret, s.foreign)
		}
		if s.sub != "" {
			keys = append(keys, s.sub)
		}
	}
	return keys
}

// countryOf is the country the rules count the phone in (otp.Phone.PumpingCountry).
func countryOf(p otp.Phone) string { return p.PumpingCountry() }

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
	block, _ := returningBlock(p)
	ret := tag + "v:" + block
	// The operator goes before its country: an attack on its ranges
	// restricts it first, and its refused sends then count nowhere, so the
	// country's other operators are still served.
	if floor := g.cfg.Floors[RuleOperator]; floor > 0 {
		if name, k, ok := operatorOf(p); ok {
			key := tag + "o:" + k
			out.subjects = append(out.subjects, subject{rule: RuleOperator, kind: 'c', floor: restrictedFloor(floor, p),
				id: otp.OperatorID(c, name), key: key, challenged: key + ":cc", foreign: key + ":cf", ret: ret})
		}
	}
	if floor := g.cfg.Floors[RuleCountry]; floor > 0 {
		out.subjects = append(out.subjects, subject{rule: RuleCountry, kind: 'c', floor: restrictedFloor(floor, p), id: c,
			key: tag + "c", challenged: tag + "cc", foreign: tag + "cf", ret: ret})
	}
	return out
}

// restrictedFloor is a country's or operator's floor for the phone: a
// dependent country's (Jersey under +44) is a fifth, as a random spread
// over the main country's numbers reaches it without aiming.
func restrictedFloor(floor int, p otp.Phone) int {
	if p.Dependent() {
		return max(floor/5, 2)
	}
	return floor
}

// returningBlock splits a number into the block of 10,000 whose hash keeps
// its approvals (field: the last four digits, value: the day of the last
// approval): a compact, expiring record of returning users, under the
// country's hash tag so a send reads it in the same call.
func returningBlock(p otp.Phone) (block, tail string) {
	d := p.E164[1:]
	cut := max(len(d)-4, 0)
	return d[:cut], d[cut:]
}

// callingCodeLen is the length of the number's country calling code.
func callingCodeLen(p otp.Phone) int {
	if cc := p.CallingCode(); cc > 0 {
		return len(strconv.Itoa(cc))
	}
	return 1
}

// netLevel is one level of the network hierarchy, widest first.
type netLevel struct {
	rule   string
	bits   int
	signal bool
}

// The levels the network rules count. The coarse ones (IPv4 /16, IPv6 /32:
// an ISP's or carrier's allocation) catch an attacker rotating over a whole
// allocation; /24 and coarser are also positive signals when they approve.
var (
	ipv4Levels = []netLevel{{RuleNet16, 16, true}, {RuleNet24, 24, true}, {RuleNet32, 32, false}}
	ipv6Levels = []netLevel{{RuleNet6x32, 32, true}, {RuleNet48, 48, true}, {RuleNet56, 56, false}, {RuleNet64, 64, false}}
)

// caller lists the client's networks, under the hash tag of the widest one
// (every narrower network of an address lies inside it); the signal levels
// carry their ledger of texts to country.
func (g *Guard) caller(ip netip.Addr, country string) group {
	ip = ip.Unmap().WithZone("")
	if !ip.IsValid() {
		return group{}
	}
	levels := ipv6Levels
	if ip.Is4() {
		levels = ipv4Levels
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
		if ip.Is4() && l.bits == 32 {
			id = ip.String()
		}
		s := subject{rule: l.rule, kind: 'n', floor: floor, id: id, key: tag + strconv.Itoa(l.bits) + ":" + id}
		if l.signal {
			s.sub = s.key + ":" + country
		}
		out.subjects = append(out.subjects, s)
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
	case strings.HasPrefix(rule, "net_"), strings.HasPrefix(rule, "net6_"):
		return "network"
	case strings.HasPrefix(rule, "spend"):
		return "spend"
	default:
		return rule
	}
}

// signalKey names the caller's narrowest network whose approvals are a
// positive signal (IPv4 /24, IPv6 /48), for the Cluster's memory of it.
func signalKey(ip netip.Addr) string { return networkKey(ip, 24, 48) }

// wideKey names the caller's widest network (IPv4 /16, IPv6 /32): what it
// is known for, its users' country, is remembered on Cluster (see
// signalFor).
func wideKey(ip netip.Addr) string { return networkKey(ip, 16, 32) }

// networkKey names the caller's network of v4 bits (IPv4) or v6 bits
// (IPv6).
func networkKey(ip netip.Addr, v4, v6 int) string {
	ip = ip.Unmap().WithZone("")
	bits := v6
	if ip.Is4() {
		bits = v4
	}
	p, _ := ip.Prefix(bits)
	return p.String()
}

// ruleBits is the prefix length a network rule counts.
func ruleBits(rule string) (int, bool) {
	for _, levels := range [][]netLevel{ipv4Levels, ipv6Levels} {
		for _, l := range levels {
			if l.rule == rule {
				return l.bits, true
			}
		}
	}
	return 0, false
}
