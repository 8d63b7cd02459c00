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

import "smsgw/otp"

// Homes maps a destination's country to its home region.
type Homes struct {
	// Version is [region] homes_version: bumped when a country moves.
	Version   int
	Default   string
	countries map[string]string
}

// NewHomes returns the table; countries maps ISO codes (or "001") to region
// names, def is the home of every other country.
func NewHomes(version int, def string, countries map[string]string) Homes {
	return Homes{Version: version, Default: def, countries: countries}
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
	p, err := otp.ParsePhone(e164, "")
	if err != nil {
		return h.Default
	}
	return h.Of(p.Country())
}
