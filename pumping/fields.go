package pumping

import (
	"strings"
)

// The hash fields of the pumping keys, declared once. Go reads them by
// these names, and the scripts by the table F that fieldsLua puts before
// them (F.texts is fieldTexts), so no code names a field by a letter or
// reads it by its place. The stored names stay as short as they were:
// data written by an older version reads the same.
//
// A subject (a range, an operator or a country and their ledgers, a
// network and its ledger of texts to a country, the spend ledger) counts
// over a window of buckets (decide.lua's header):
const (
	fieldOldest     = "b"  // the oldest bucket still inside the window
	fieldTexts      = "S"  // texts counted in the window (money: micro-units)
	fieldApproved   = "A"  // codes approved in the window
	fieldTextsIn    = "s"  // + bucket: texts counted in that bucket
	fieldApprovedIn = "a"  // + bucket: codes approved in that bucket
	fieldApprovedOn = "d"  // + day: codes approved in that window-long day
	fieldPeak       = "pk" // the most approvals of a day over the 14 before fieldPeakDay
	fieldPeakDay    = "pd" // the day fieldPeak was worked out
	fieldExpires    = "x"  // when the key expires (ms), as the scripts last set it
	fieldProbed     = "pr" // a network over budget: when it last let a probe through
)

// An operator's or a country's restriction (and that of its ledger of
// networks known abroad), read by the console through Guard.restriction:
const (
	fieldRestrictedUntil    = "rx" // ms
	fieldRestrictedSince    = "rs" // ms
	fieldTripUsed           = "ru" // the unverified texts that tripped it
	fieldTripBudget         = "rb" // the budget they went over
	fieldTripHour           = "rh" // 1: the last hour's budget, not the window's
	fieldTripWindow         = "rw" // the window's budget at the trip, held for a window
	fieldRefused            = "nq" // sends refused while restricted
	fieldServedReturning    = "nr" // signed sends served: by a returning number,
	fieldServedNetwork      = "nn" // an approving caller network,
	fieldServedChallenge    = "nc" // a solved challenge
	fieldAbroadRefused      = "oq" // a ledger abroad: refusals within the hour since
	fieldAbroadRefusedSince = "ot" // the first of them (ms)
	fieldPressureNow        = "pq" // its own ledger: sends refused while restricted in this period,
	fieldPressureSince      = "pt" // when this period began (ms),
	fieldPressureLast       = "pl" // those refused in the period before it,
	fieldPressurePeak       = "pp" // and the most of a period since the trip
)

// A phone's record (the destination group's first key):
const (
	fieldRecBucket    = "h" // the bucket the number was counted in
	fieldRecApproved  = "v" // a code approved since
	fieldRecCountry   = "u" // counted in its operator and country
	fieldRecChallenge = "k" // counted in their challenge ledgers
	fieldRecForeign   = "f" // counted in their ledgers of networks known abroad
	fieldRecResends   = "t" // texts since it was counted or approved
	fieldRecNetwork   = "n" // the caller network that asked, to credit
	fieldRecOwed      = "w" // approved before: the networks of a later text are owed the credit
)

// hashFields names each field for the scripts: F.<lua> is the field.
var hashFields = []struct{ lua, field string }{
	{"oldest", fieldOldest}, {"texts", fieldTexts}, {"approved", fieldApproved},
	{"textsIn", fieldTextsIn}, {"approvedIn", fieldApprovedIn}, {"approvedOn", fieldApprovedOn},
	{"peak", fieldPeak}, {"peakDay", fieldPeakDay}, {"expires", fieldExpires}, {"probed", fieldProbed},
	{"restrictedUntil", fieldRestrictedUntil}, {"restrictedSince", fieldRestrictedSince},
	{"tripUsed", fieldTripUsed}, {"tripBudget", fieldTripBudget}, {"tripHour", fieldTripHour},
	{"tripWindow", fieldTripWindow},
	{"refused", fieldRefused}, {"servedReturning", fieldServedReturning},
	{"servedNetwork", fieldServedNetwork}, {"servedChallenge", fieldServedChallenge},
	{"abroadRefused", fieldAbroadRefused}, {"abroadRefusedSince", fieldAbroadRefusedSince},
	{"pressureNow", fieldPressureNow}, {"pressureSince", fieldPressureSince},
	{"pressureLast", fieldPressureLast}, {"pressurePeak", fieldPressurePeak},
	{"recBucket", fieldRecBucket}, {"recApproved", fieldRecApproved}, {"recCountry", fieldRecCountry},
	{"recChallenge", fieldRecChallenge}, {"recForeign", fieldRecForeign}, {"recResends", fieldRecResends},
	{"recNetwork", fieldRecNetwork}, {"recOwed", fieldRecOwed},
}

// fieldsLua is the scripts' declaration of hashFields: a Lua table F,
// put after luascript's prelude.
var fieldsLua = func() string {
	var b strings.Builder
	b.WriteString("-- The hash fields, from pumping/fields.go.\nlocal F = {")
	for i, f := range hashFields {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(f.lua + " = '" + f.field + "'")
	}
	b.WriteString("}\n")
	return b.String()
}()

// servedFields is the field a restricted operator or country counts a
// signed send it served in, by its sign ("r" a returning number, "n" an
// approving caller network, "c" a solved challenge).
var servedFields = map[string]string{"r": fieldServedReturning, "n": fieldServedNetwork, "c": fieldServedChallenge}
