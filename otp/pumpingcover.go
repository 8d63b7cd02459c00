package otp

import "strings"

// Covers says whether the hold's subject takes in the number: a range
// ("+3712000xxxx", its digits then one x per digit left out) holding the
// number's block, or the number's country. Networks and the spend ledger
// are not the number's. The operators' view of one number (and the lift
// that goes with "reset limits") lists what holds it by this.
func (h PumpingHold) Covers(p Phone) bool {
	s := h.Subject
	if strings.HasPrefix(s, "+") {
		block := strings.TrimRight(s, "x")
		return block != s && len(s) == len(p.E164) && strings.HasPrefix(p.E164, block)
	}
	country := p.Country()
	if country == "" {
		country = "ZZ" // pumping names the numbers of no country so
	}
	return len(s) == 2 && s == country
}
