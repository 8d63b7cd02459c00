package pumping

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"smsgw/otp"
)

// Bad input stays harmless: numbers no prefix data names an operator for,
// odd operator names, operators of one name in countries that share a
// calling code.

// A number without operator data is decided by its country alone and
// leaves no operator key behind.
func TestNumbersWithoutOperatorData(t *testing.T) {
	eachLayout(t, func(t *testing.T, f *fixture, cluster bool) {
		g := f.guard(t, only(RuleOperator, RuleCountry), cluster)
		admitted := 0
		for i := range 14 {
			r := reserve(t, g, phone(t, fmt.Sprintf("+1415555%04d", 1000+i*37)), ip(fmt.Sprintf("198.18.%d.1", i)))
			switch {
			case r.Refused == nil:
				admitted++
			case r.Refused.Rule != RuleCountry || r.Refused.Subject != "US":
				t.Fatalf("send %d refused by %s %q; want the country", i, r.Refused.Rule, r.Refused.Subject)
			}
		}
		if want := DefaultFloors()[RuleCountry]; admitted != want {
			t.Fatalf("admitted %d; want the country's floor %d", admitted, want)
		}
		keys, err := f.rdb.Keys(context.Background(), f.prefix+"*:o:*").Result()
		if err != nil || len(keys) > 0 {
			t.Fatalf("operator keys for numbers without operator data: %v %v", keys, err)
		}
	})
}

// Jersey and Guernsey share +44 with the United Kingdom, and their
// operators share the name "JT": two subjects under two countries' hash
// tags, so an attack on Jersey's restricts Jersey's JT alone.
func TestOperatorsOfOneNameInCountriesSharingACode(t *testing.T) {
	eachLayout(t, func(t *testing.T, f *fixture, cluster bool) {
		g := f.guard(t, only(RuleOperator, RuleCountry), cluster)
		je, gg := g.destination(phone(t, "+447797123456")), g.destination(phone(t, "+447911123456"))
		if je.subjects[0].id != "JE/JT" || gg.subjects[0].id != "GG/JT" || je.subjects[0].key == gg.subjects[0].key {
			t.Fatalf("JE's and GG's JT: %+v, %+v", je.subjects[0], gg.subjects[0])
		}
		refused := 0
		for i := range 12 {
			r := reserve(t, g, phone(t, fmt.Sprintf("+447797%06d", 100003+i*79031)), ip(fmt.Sprintf("203.0.%d.9", i)))
			if r.Refused != nil {
				if r.Refused.Subject != "JE/JT" || r.Refused.Scope != "operator" {
					t.Fatalf("send %d refused by %s %q; want JE/JT", i, r.Refused.Rule, r.Refused.Subject)
				}
				refused++
			}
		}
		if refused == 0 {
			t.Fatal("the spread over JE/JT was never refused")
		}
		for i, p := range []string{"+447911123456", "+447911123499", "+447400123456", "+447400654321"} {
			if r := reserve(t, g, phone(t, p), ip(fmt.Sprintf("198.18.7.%d", i+1))); r.Refused != nil {
				t.Fatalf("%s refused while JE/JT is restricted: %+v", p, r.Refused)
			}
		}
	})
}

// Names with quotes, backslashes, percent signs and braces, and very long
// ones, make safe keys, clean ids and valid metric labels.
func TestOddOperatorNames(t *testing.T) {
	for _, raw := range []string{`"Glo"`, `O'Neil`, `back\slash`, `100%`, `{JT}`, `a"}{"b`, "\u00a0MTN\u00a0",
		strings.Repeat("Ø", 200), strings.Repeat(`"`, 100)} {
		name := otp.CleanOperatorName(raw)
		if name == "" || len(name) > otp.MaxOperatorName || !utf8Valid(name) {
			t.Errorf("%q: display name %q", raw, name)
		}
		k := operatorKey(name)
		if strings.ContainsAny(k, "{}\"'\\% :") || len(k) > 24+1+16 {
			t.Errorf("%q: key part %q", raw, k)
		}
		id := otp.OperatorID("NG", name)
		if !strings.HasPrefix(id, "NG/") || strings.ContainsAny(id, "\n\x00") {
			t.Errorf("%q: id %q", raw, id)
		}
		m := newMetrics(nil)
		m.opTexts.WithLabelValues("NG", name).Inc() // panics on a label Prometheus refuses
	}
}
