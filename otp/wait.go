package otp

import "fmt"

// waitInWords says a wait as a person reads it, "about 24 hours" rather
// than "84920 s": a pumping hold lasts up to a day, and its refusal is
// often first read by someone trying the service.
func waitInWords(secs int64) string {
	round := func(unit int64) int64 { return (secs + unit/2) / unit }
	plural := func(n int64, word string) string {
		if n == 1 {
			return "1 " + word
		}
		return fmt.Sprintf("%d %ss", n, word)
	}
	switch {
	case secs < 90:
		return plural(max(secs, 1), "second")
	case secs < 90*60:
		return "about " + plural(round(60), "minute")
	case secs < 48*3600:
		return "about " + plural(round(3600), "hour")
	}
	return "about " + plural(round(86400), "day")
}

// liftHint says how an operator lifts a pumping hold of scope.
func liftHint(scope, rule string) string {
	switch scope {
	case "range", "country":
		return "; an operator can lift it: the console's \"Reset limits\" for the number, pumping holds included, " +
			"or DELETE /v1/admin/limits?phone=<number>&pumping=true"
	case "network":
		return "; an operator can lift it: the console's Pumping page, or DELETE /v1/admin/pumping?rule=" + rule + "&subject=<network>"
	}
	return ""
}
