package otp

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nyaruka/phonenumbers"
)

// maxPhoneInput bounds what reaches the parser. The longest legitimate
// notation ("+1 (415) 555-0100 ext. 12345" and the like) is far shorter; the
// bound keeps hostile input cheap to refuse.
const maxPhoneInput = 64

// Phone is a validated phone number.
type Phone struct {
	E164 string // "+14155550100": the identity used for limits, codes and audit
	Type string // phonenumbers' type in snake case, e.g. "mobile"
	num  *phonenumbers.PhoneNumber
	// region is worked out once, at parse time: for shared calling codes
	// (+1, +7, +44) it costs a pattern match per candidate region, and the
	// policy, the pumping rules and the router all ask for it.
	region string
}

// Country is the ISO 3166-1 alpha-2 region of the number, e.g. "US", or
// "001" for the international networks.
func (p Phone) Country() string { return p.region }

// ParsePhone normalizes a number written in any common notation. region is
// the ISO 3166-1 alpha-2 code used for national notation ("(415) 555-0100");
// numbers in international notation ignore it. Anything that is not a valid,
// dialable number is an EInvalidPhone error.
func ParsePhone(raw, region string) (Phone, error) {
	if len(raw) > maxPhoneInput {
		return Phone{}, Errorf(EInvalidPhone, "phone is too long")
	}
	if !utf8.ValidString(raw) || strings.ContainsFunc(raw, isControl) {
		return Phone{}, Errorf(EInvalidPhone, "phone contains control or invalid characters")
	}
	if strings.TrimSpace(raw) == "" {
		return Phone{}, Errorf(EInvalidPhone, "phone is empty")
	}
	region = strings.ToUpper(region)
	p, err := parseValid(trimUnwantedEnd(raw), region)
	if err == nil {
		return p, nil
	}
	// "00 44 20 7946 0958" is international in most of the world; where the
	// region dials abroad otherwise (011 in the US), it is still read so
	// when the rest is a valid international number.
	if rest, ok := zeroZeroPrefixed(raw); ok && !dialsAbroadWith00(region) {
		if p, err := parseValid("+"+rest, ""); err == nil {
			return p, nil
		}
	}
	return Phone{}, err
}

// parseValid parses and checks one notation. Its errors say how to write a
// number that was read as national.
func parseValid(raw, region string) (Phone, error) {
	num, ok := parseE164(raw, region)
	var err error
	if !ok {
		num, err = phonenumbers.Parse(raw, region)
	}
	if err != nil {
		return Phone{}, &Error{Code: EInvalidPhone, Message: "phone is not a phone number" + notationHint(raw, region), Err: err}
	}
	// A number is valid exactly when its region's metadata gives it a type
	// (that is how IsValidNumber decides), so the type lookup doubles as the
	// validity check; numberKind finds the type and the region in one pass.
	typ, home := numberKind(num)
	if typ == phonenumbers.UNKNOWN {
		return Phone{}, Errorf(EInvalidPhone, "phone is not a valid number%s", notationHint(raw, region))
	}
	return Phone{E164: phonenumbers.Format(num, phonenumbers.E164), Type: numberTypeName(typ), num: num,
		region: home}, nil
}

// hintNumber is the number the hint shows: a mobile (a landline would be
// refused by the default phone.allowed_types right after).
const hintNumber = "+44 7400 123456"

// notationHint tells the writer of a number without "+" how it was read
// and how to write it: a number in international notation needs no region.
func notationHint(raw, region string) string {
	if strings.HasPrefix(strings.TrimLeftFunc(raw, unicode.IsSpace), "+") || region == "" {
		return ""
	}
	return fmt.Sprintf(" in region %s; write it with its country code (%q) or send its \"region\"", region, hintNumber)
}

// zeroZeroPrefixed returns the digits after a leading "00" ("00 44 20 …",
// "0044-20…"), when the number starts so.
func zeroZeroPrefixed(raw string) (string, bool) {
	digits := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		if unicode.IsSpace(r) || strings.ContainsRune("-.()/", r) {
			return -1
		}
		return 'x'
	}, raw)
	rest, ok := strings.CutPrefix(digits, "00")
	if !ok || rest == "" || strings.ContainsRune(rest, 'x') {
		return "", false
	}
	return rest, true
}

// dialsAbroadWith00 reports whether the region's own international prefix
// is "00": there a leading 00 is read by the region's rules already. It asks
// how the region would dial a number abroad.
func dialsAbroadWith00(region string) bool {
	probe := probeAbroad
	if region == "GB" {
		probe = probeAbroadFromGB
	}
	return strings.HasPrefix(phonenumbers.FormatOutOfCountryCallingNumber(probe, region), "00")
}

// Numbers abroad for dialsAbroadWith00.
var probeAbroad, probeAbroadFromGB = mustParse("+442079460958"), mustParse("+14155552671")

func mustParse(e164 string) *phonenumbers.PhoneNumber {
	n, err := phonenumbers.Parse(e164, "")
	if err != nil {
		panic(err)
	}
	return n
}

// trimUnwantedEnd drops what libphonenumber drops from the end of a number
// before parsing it: everything after its last digit, letter or '#' (a
// comma, a right-to-left mark, a closing bidi isolate, an emoji). Its
// pattern, UNWANTED_END_CHARS "[[\P{N}&&\P{L}]&&[^#]]+$", is a Java class
// intersection; nyaruka/phonenumbers hands it to Go's regexp, which has no
// intersections and reads it as a pattern that strips nothing, so the port
// refuses "+24762889," where libphonenumber reads +247 6288 9.
func trimUnwantedEnd(s string) string {
	return strings.TrimRightFunc(s, func(r rune) bool { return !unicode.IsNumber(r) && !unicode.IsLetter(r) && r != '#' })
}

// PlusFromQuery undoes what an unencoded "+" becomes in a URL query (a
// space), so "?phone=+14155552671" works as people type it.
func PlusFromQuery(s string) string {
	if strings.HasPrefix(s, " ") {
		return "+" + strings.TrimLeft(s, " ")
	}
	return s
}

// ParseQueryPhone reads an optional phone from a URL query (?phone=) as
// E.164, "" when absent, in any notation a send accepts.
func ParseQueryPhone(raw, region string) (string, error) {
	raw = PlusFromQuery(raw)
	if raw == "" {
		return "", nil
	}
	p, err := ParsePhone(raw, region)
	if err != nil {
		return "", err
	}
	return p.E164, nil
}

// ValidRegion reports whether s has the shape of an ISO 3166-1 alpha-2 code.
// Whether the region exists is left to the parser: an unknown region only
// matters for national notation, where it makes the number unparseable.
func ValidRegion(s string) bool {
	if len(s) != 2 {
		return false
	}
	for i := 0; i < 2; i++ {
		c := s[i] | 0x20 // ASCII lower case
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

func numberTypeName(t phonenumbers.PhoneNumberType) string {
	switch t {
	case phonenumbers.FIXED_LINE:
		return "fixed_line"
	case phonenumbers.MOBILE:
		return "mobile"
	case phonenumbers.FIXED_LINE_OR_MOBILE:
		return "fixed_line_or_mobile"
	case phonenumbers.TOLL_FREE:
		return "toll_free"
	case phonenumbers.PREMIUM_RATE:
		return "premium_rate"
	case phonenumbers.SHARED_COST:
		return "shared_cost"
	case phonenumbers.VOIP:
		return "voip"
	case phonenumbers.PERSONAL_NUMBER:
		return "personal_number"
	case phonenumbers.PAGER:
		return "pager"
	case phonenumbers.UAN:
		return "uan"
	case phonenumbers.VOICEMAIL:
		return "voicemail"
	default:
		return "unknown"
	}
}

// CallingCode is the number's country calling code, e.g. 44.
func (p Phone) CallingCode() int {
	if p.num == nil {
		return 0
	}
	return int(p.num.GetCountryCode())
}

// Dependent says whether the number's country shares its calling code with
// another that phonenumbers names first (Jersey, Guernsey and the Isle of
// Man under +44's United Kingdom; Canada and the Caribbean under +1): a
// random spread over the main country's numbers reaches it without aiming.
func (p Phone) Dependent() bool {
	cc := p.CallingCode()
	return cc > 0 && p.region != "" && phonenumbers.GetRegionCodeForCountryCode(cc) != p.region
}
