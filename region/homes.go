// Package region spreads one smsgw deployment over several regions, each
// with its own Redis and Postgres. State keyed by the destination number
// (its windows, code, idempotency scope, pumping destination budgets) lives
// in the number's home region, chosen by its country; state keyed by the
// client (address windows, caller-network budgets) lives where the request
// is seen. A decision over both is made like one over the shards of a
// Redis Cluster: reserve here, decide there, commit or release here. While
// a home region is out of reach a region may admit up to a fallback
// allowance per key and window from a local ledger, and carries those
// admissions home once it is back (see docs/regions.md).
package region

import (
	"strconv"
	"sync"

	"github.com/nyaruka/phonenumbers"

	"smsgw/otp"
)

// Homes maps a destination's country to its home region.
type Homes struct {
	// Version is [region] homes_version: bumped when a country moves.
	Version   int
	Default   string
	countries map[string]string
	// previous maps a country being moved to its old home: until the
	// move ends, its windows are decided in both (docs/regions.md).
	previous map[string]string
	// byCallingCode is the home of every calling code whose countries
	// share one home (+1 when the US, Canada and the Caribbean do): a
	// number's home without parsing it again.
	byCallingCode map[int]string
	// parsed remembers the homes of numbers that had to be parsed: a send
	// routes its code and idempotency scope, and its verify, by number.
	parsed *parsedHomes
}

// parsedHomes is a bounded memory of numbers' homes; when full it starts
// afresh (attackers choose the numbers, and a miss only costs a parse).
type parsedHomes struct {
	mu sync.Mutex
	m  map[string]string
}

const parsedHomesMax = 100_000

func (p *parsedHomes) get(e164 string) (string, bool) {
	if p == nil {
		return "", false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	h, ok := p.m[e164]
	return h, ok
}

func (p *parsedHomes) put(e164, home string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.m) >= parsedHomesMax {
		p.m = make(map[string]string)
	}
	p.m[e164] = home
}

// NewHomes returns the table; countries maps ISO codes (or "001") to region
// names, def is the home of every other country, previous the old home of
// each country being moved.
func NewHomes(version int, def string, countries, previous map[string]string) Homes {
	h := Homes{Version: version, Default: def, countries: countries, previous: previous, byCallingCode: map[int]string{},
		parsed: &parsedHomes{m: map[string]string{}}}
	for cc := range phonenumbers.GetSupportedCallingCodes() {
		home := ""
		for i, c := range phonenumbers.GetRegionCodesForCountryCode(cc) {
			if i > 0 && h.Of(c) != home {
				home = ""
				break
			}
			home = h.Of(c)
		}
		if home != "" {
			h.byCallingCode[cc] = home
		}
	}
	return h
}

// Remember notes a number's country, known to a caller that parsed it, so
// that routing its code and idempotency scope later parses nothing.
func (h Homes) Remember(e164, country string) {
	if _, ok := h.parsed.get(e164); !ok {
		h.parsed.put(e164, h.Of(country))
	}
}

// Previous is the old home of a country being moved, or "".
func (h Homes) Previous(country string) string {
	if p := h.previous[country]; p != h.Of(country) {
		return p
	}
	return ""
}

// PreviousOfNumber is Previous for an E.164 number.
func (h Homes) PreviousOfNumber(e164 string) string {
	if len(h.previous) == 0 {
		return ""
	}
	p, err := otp.ParsePhone(e164, "")
	if err != nil {
		return ""
	}
	return h.Previous(p.Country())
}

// Of is the home region of a country.
func (h Homes) Of(country string) string {
	if r, ok := h.countries[country]; ok {
		return r
	}
	return h.Default
}

// OfNumber is the home region of an E.164 number; a number that does not
// parse (never stored by the flows) goes to the default home.
func (h Homes) OfNumber(e164 string) string {
	// Calling codes are prefix-free: the first of 1 to 3 digits that is
	// one is the number's.
	for n := 1; n <= 3 && n < len(e164); n++ {
		cc, err := strconv.Atoi(e164[1 : 1+n])
		if err != nil {
			break
		}
		if home, ok := h.byCallingCode[cc]; ok {
			return home
		}
		if phonenumbers.GetSupportedCallingCodes()[cc] {
			break // countries of this code have different homes
		}
	}
	if home, ok := h.parsed.get(e164); ok {
		return home
	}
	home := h.Default
	if p, err := otp.ParsePhone(e164, ""); err == nil {
		home = h.Of(p.Country())
	}
	h.parsed.put(e164, home)
	return home
}
