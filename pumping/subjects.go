package pumping

import (
	"net/netip"
	"strconv"
	"strings"
	"unsafe"

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
	switch {
	case s.sub != "":
		return "N"
	case s.kind == 'r':
		return "r" // a constant: string(s.kind) allocates
	case s.kind == 'c':
		return "c"
	case s.kind == 'n':
		return "n"
	case s.kind == 'm':
		return "m"
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
	n := 1 + len(g.subjects)
	for _, s := range g.subjects {
		if s.kind == 'c' {
			n += 3
		}
		if s.sub != "" {
			n++
		}
	}
	keys := make([]string, 0, n)
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
//
// Its keys and ids are pieces of one string (pieces), one allocation for
// them all.
func (g *Guard) destination(p otp.Phone) group {
	c := countryOf(p)
	digits := p.E164[1:]
	cc := callingCodeLen(p)
	var b pieces
	b.grow(destinationBytes(len(g.prefix), len(c), len(digits)))
	// tag is "<prefix>pump:{d:<country>}:", written before each key.
	tag := func() int {
		at := len(b.b)
		b.b = append(b.b, g.prefix...)
		b.b = append(b.b, "pump:{d:"...)
		b.b = append(b.b, c...)
		b.b = append(b.b, "}:"...)
		return at
	}
	var (
		subjects [6]subject // 4 ranges, an operator, the country
		spans    [6]struct{ key, id span }
		n        int
	)
	at := tag()
	b.add("p:", p.E164)
	record := b.from(at)
	for _, rule := range []string{RuleRange100, RuleRange1k, RuleRange10k, RuleRange100k} {
		floor := g.cfg.Floors[rule]
		drop := rangeDigits[rule]
		if floor <= 0 || len(digits)-drop <= cc {
			continue
		}
		block := digits[:len(digits)-drop]
		at := tag()
		b.add("r:", block)
		spans[n].key = b.from(at)
		at = len(b.b)
		b.add("+", block)
		for range drop {
			b.b = append(b.b, 'x')
		}
		spans[n].id = b.from(at)
		subjects[n] = subject{rule: rule, kind: 'r', floor: floor}
		n++
	}
	block, _ := returningBlock(p)
	at = tag()
	b.add("v:", block)
	ret := b.from(at)
	// The operator goes before its country: an attack on its ranges
	// restricts it first, and its refused sends then count nowhere, so the
	// country's other operators are still served.
	var opKey, opChallenged, opForeign span
	var opID string
	op := -1
	if floor := g.cfg.Floors[RuleOperator]; floor > 0 {
		if name, k, ok := operatorOf(p); ok {
			at := tag()
			b.add("o:", k, ":cc")
			opChallenged = b.from(at)
			opKey = span{opChallenged.from, opChallenged.to - len(":cc")}
			at = tag()
			b.add("o:", k, ":cf")
			opForeign = b.from(at)
			opID, op = otp.OperatorID(c, name), n
			subjects[n] = subject{rule: RuleOperator, kind: 'c', floor: restrictedFloor(floor, p)}
			n++
		}
	}
	var cKey, cChallenged, cForeign span
	country := -1
	if floor := g.cfg.Floors[RuleCountry]; floor > 0 {
		at := tag()
		b.add("cc")
		cChallenged = b.from(at)
		cKey = span{cChallenged.from, cChallenged.to - 1}
		at = tag()
		b.add("cf")
		cForeign = b.from(at)
		country = n
		subjects[n] = subject{rule: RuleCountry, kind: 'c', floor: restrictedFloor(floor, p), id: c}
		n++
	}
	all := b.done()
	out := group{record: record.of(all), subjects: make([]subject, n)}
	copy(out.subjects, subjects[:n])
	for i := range out.subjects {
		s := &out.subjects[i]
		switch i {
		case op:
			s.id, s.key, s.challenged, s.foreign, s.ret = opID, opKey.of(all), opChallenged.of(all), opForeign.of(all), ret.of(all)
		case country:
			s.key, s.challenged, s.foreign, s.ret = cKey.of(all), cChallenged.of(all), cForeign.of(all), ret.of(all)
		default:
			s.key, s.id = spans[i].key.of(all), spans[i].id.of(all)
		}
	}
	return out
}

// destinationBytes is about what destination writes: its record, four
// ranges' keys and ids, the returning block and up to five keys of an
// operator and a country (an operator's key is longer: pieces grows).
func destinationBytes(prefix, country, digits int) int {
	tag := prefix + len("pump:{d:}:") + country
	return 11*tag + 2 + 1 + digits + 4*(2+digits+1+digits) + 2 + digits + 2*(2+24+3) + 4
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
//
// Its keys and ids are pieces of one string (pieces): a level's key is
// "<tag><bits>:<id>", its id the key's end and its ledger the key and
// ":<country>", so each level writes one string.
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
	var b pieces
	b.grow(len(levels) * (len(g.prefix) + len("pump:{n:}:") + 2*len("ffff:ffff:ffff:ffff::/64") + 4 + 1 + len(country)))
	var (
		subjects [4]subject // the most levels of a family
		spans    [4]struct{ key, id, sub span }
		n        int
	)
	for _, l := range levels {
		floor := g.cfg.Floors[l.rule]
		if floor <= 0 {
			continue
		}
		at := len(b.b)
		b.add(g.prefix, "pump:{n:")
		b.b = widest.AppendTo(b.b)
		b.add("}:")
		b.b = strconv.AppendInt(b.b, int64(l.bits), 10)
		b.add(":")
		idAt := len(b.b)
		if ip.Is4() && l.bits == 32 {
			b.b = ip.AppendTo(b.b)
		} else {
			p, _ := ip.Prefix(l.bits)
			b.b = p.AppendTo(b.b)
		}
		spans[n].key, spans[n].id = b.from(at), b.from(idAt)
		if l.signal {
			b.add(":", country)
			spans[n].sub = b.from(at)
		}
		subjects[n] = subject{rule: l.rule, kind: 'n', floor: floor}
		n++
	}
	all := b.done()
	out := group{subjects: make([]subject, n)}
	copy(out.subjects, subjects[:n])
	for i := range out.subjects {
		s := &out.subjects[i]
		s.key, s.id, s.sub = spans[i].key.of(all), spans[i].id.of(all), spans[i].sub.of(all)
	}
	return out
}

// pieces writes several strings as pieces of one: a send's keys and ids
// cost one allocation, not one each. A piece keeps the whole string
// alive; what outlives the send (a hold's subject) is cloned.
type pieces struct{ b []byte }

// span is a piece, by its place in the string.
type span struct{ from, to int }

func (p *pieces) grow(n int) { p.b = make([]byte, 0, n) }

// add writes ss.
func (p *pieces) add(ss ...string) {
	for _, s := range ss {
		p.b = append(p.b, s...)
	}
}

// from is the piece written since at.
func (p *pieces) from(at int) span { return span{at, len(p.b)} }

// done is the string written; nothing may be written after.
func (p *pieces) done() string {
	s := unsafe.String(unsafe.SliceData(p.b), len(p.b))
	p.b = nil
	return s
}

// of is the piece of all; "" for an empty span.
func (s span) of(all string) string {
	if s.to == s.from {
		return ""
	}
	return all[s.from:s.to]
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
