package otp

import "strings"

// Covers says whether the hold's subject takes in the number: a range
// ("+3712000xxxx", its digits then one x per digit left out) holding the
// number's block, the number's operator or its country. Networks and the
// spend ledger are not the number's. The operators' view of one number
// (and the lift that goes with "reset limits") lists what holds it by this.
func (h PumpingHold) Covers(p Phone) bool {
	s := h.Subject
	if strings.HasPrefix(s, "+") {
		block := strings.TrimRight(s, "x")
		return block != s && len(s) == len(p.E164) && strings.HasPrefix(p.E164, block)
	}
	if strings.Contains(s, "/") {
		return s == p.PumpingOperator()
	}
	return s == p.PumpingCountry()
}

// HoldsCovering is the holds in held that cover the number (Covers).
func HoldsCovering(held []PumpingHold, p Phone) []PumpingHold {
	var out []PumpingHold
	for _, h := range held {
		if h.Covers(p) {
			out = append(out, h)
		}
	}
	return out
}
