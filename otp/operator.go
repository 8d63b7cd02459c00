package otp

import "github.com/nyaruka/phonenumbers"

// Operator is the mobile operator libphonenumber's prefix data names for the
// number's range ("Glo" for +234805…), "" when it has none (the US, Brazil,
// most fixed lines). Porting makes it a guess for one number; pumping is
// paid through the operator that owns a range, so for an attack's traffic,
// which is on that operator's own ranges, it is right. The lookup is not
// made at parse time: only the pumping rules ask.
func (p Phone) Operator() string {
	if p.num == nil {
		return ""
	}
	name, _, err := phonenumbers.GetCarrierWithPrefixForNumber(p.num, "en")
	if err != nil {
		return ""
	}
	return name
}
