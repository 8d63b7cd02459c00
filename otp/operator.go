package otp

import (
	"strings"
	"unicode"
	"unicode/utf8"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/nyaruka/phonenumbers"
)

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
	// The prefix data is looked up by the E.164 text's first
	// operatorPrefixLen characters at most (the longest prefix the library
	// tries), so numbers that share them share the answer: a new number of
	// a range seen before costs a cache look-up, not two of the library's
	// (it asks "en" and then falls back to "en" when the first finds none),
	// each behind its one global lock.
	// (E164 is the library's E.164 text of num: parseValid made both.)
	key := p.E164[:min(len(p.E164), operatorPrefixLen)]
	if name, ok := operators.Get(key); ok {
		return name
	}
	name, _, err := phonenumbers.GetCarrierWithPrefixForNumber(p.num, "en")
	if err != nil {
		return ""
	}
	operators.Add(key, name)
	return name
}

// operatorPrefixLen is the maxLength GetCarrierWithPrefixForNumber passes
// its prefix look-up: it reads no character of the E.164 text past it.
const operatorPrefixLen = 10

// operators remembers Operator's answers by the E.164 text's first
// operatorPrefixLen characters; bounded, as callers choose the numbers.
var operators = func() *lru.Cache[string, string] {
	c, err := lru.New[string, string](1 << 14)
	if err != nil {
		panic(err)
	}
	return c
}()

// MaxOperatorName bounds an operator's name as people see it (subject ids,
// metric labels); libphonenumber's longest are about 40 bytes.
const MaxOperatorName = 64

// CleanOperatorName is a name from the prefix data as people see it:
// control and format characters and invalid UTF-8 dropped, spaces folded,
// at most MaxOperatorName bytes.
func CleanOperatorName(raw string) string {
	s := strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return -1
		}
		if unicode.IsSpace(r) {
			return ' '
		}
		return r
	}, raw)
	s = strings.Join(strings.Fields(s), " ")
	for len(s) > MaxOperatorName {
		_, n := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-n]
	}
	return s
}

// PumpingCountry is the country the pumping rules count the number in:
// "ZZ" for the numbers of no country ("001" is phonenumbers' region for the
// international networks), so they cannot slip past the country rule.
func (p Phone) PumpingCountry() string {
	if c := p.Country(); c != "" {
		return c
	}
	return "ZZ"
}

// PumpingOperator is the id of the number's operator subject ("NG/Glo"),
// "" when the number has none.
func (p Phone) PumpingOperator() string {
	name := CleanOperatorName(p.Operator())
	if name == "" {
		return ""
	}
	return OperatorID(p.PumpingCountry(), name)
}

// OperatorID is an operator subject's id as people see it: the country, a
// slash, the cleaned name ("NG/Glo").
func OperatorID(country, name string) string { return country + "/" + name }
