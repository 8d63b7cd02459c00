package pumping

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"smsgw/otp"
)

// Nigerian operators' ranges, as libphonenumber's prefix data names them.
var (
	gloRanges = []string{"+234805", "+234807", "+234815", "+234811", "+234905"}
	mtnRanges = []string{"+234803", "+234806", "+234813", "+234816", "+234903"}
)

// spreadOver is send i of a random-looking spread over ranges.
func spreadOver(ranges []string, i int) string {
	return fmt.Sprintf("%s%07d", ranges[i%len(ranges)], (1000003+i*7919)%10_000_000)
}

// An attack spread over one operator's ranges fills no block, so only the
// operator and the country see it: the operator, checked first with half
// the country's floor, is restricted, and the country's other operators
// are served.
func TestAnAttackOnOneOperatorRestrictsItAlone(t *testing.T) {
	eachLayout(t, func(t *testing.T, f *fixture, cluster bool) {
		ctx := context.Background()
		g := f.guard(t, only(RuleOperator, RuleCountry), cluster)
		// A Glo user verified a code yesterday: a returning number.
		back := phone(t, "+2348051234567")
		if r := reserve(t, g, back, ip("198.18.0.1")); r.Refused != nil {
			t.Fatalf("a first user refused: %+v", r.Refused)
		}
		if err := g.Approved(ctx, back); err != nil {
			t.Fatal(err)
		}
		f.advance(25 * 3600e9)
		// A quiet hour: the short horizon holds Glo to its floor.
		admitted := 0
		for i := range 40 {
			r := reserve(t, g, phone(t, spreadOver(gloRanges, i)), ip(fmt.Sprintf("203.0.%d.%d", i, 9+i)))
			switch {
			case r.Refused == nil:
				admitted++
			case r.Refused.Rule != RuleOperator || r.Refused.Scope != "operator" || r.Refused.Subject != "NG/Glo":
				t.Fatalf("send %d refused by %s %s %q; want the operator NG/Glo", i, r.Refused.Rule, r.Refused.Scope, r.Refused.Subject)
			}
		}
		if want := DefaultFloors()[RuleOperator]; admitted != want {
			t.Fatalf("the spread over Glo got %d texts; want its floor, %d", admitted, want)
		}
		var m dto.Metric
		if err := g.m.opRefusals.WithLabelValues("NG", "Glo", ModeEnforce).Write(&m); err != nil {
			t.Fatal(err)
		}
		if got := m.GetCounter().GetValue(); got != float64(40-admitted) {
			t.Fatalf("smsgw_pumping_operator_refusals_total{NG,Glo} = %v, want %d", got, 40-admitted)
		}
		// Users of another operator are served: the country counted only
		// the sends the operator admitted.
		for i := range 4 {
			if r := reserve(t, g, phone(t, spreadOver(mtnRanges, i)), ip(fmt.Sprintf("198.18.%d.7", 1+i))); r.Refused != nil {
				t.Fatalf("an MTN user refused while Glo is restricted: %+v", r.Refused)
			}
		}
		// Signed sends to Glo pass: the returning number, a solved
		// challenge.
		if r := reserve(t, g, back, ip("198.18.9.1")); r.Refused != nil {
			t.Fatalf("a returning Glo user refused: %+v", r.Refused)
		}
		if r, err := g.Reserve(ctx, phone(t, "+2348079990001"), ip("198.18.9.2"), true); err != nil || r.Refused != nil {
			t.Fatalf("a Glo send with a solved challenge: %+v, %v", r.Refused, err)
		}
		held, _, err := g.Holds(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var glo *otp.CountryRestriction
		for _, h := range held {
			if h.Rule == RuleCountry {
				t.Fatalf("the country is held: %+v", h)
			}
			if h.Rule == RuleOperator && h.Subject == "NG/Glo" {
				glo = h.Restricted
			}
		}
		if glo == nil || glo.Abroad || glo.Refused != int64(40-admitted) || glo.ServedReturning != 1 || glo.ServedChallenge != 1 {
			t.Fatalf("Glo listed as %+v; want restricted, %d refused, one returning and one challenge served", glo, 40-admitted)
		}
		// Lifting it serves new Glo users again.
		if err := g.Lift(ctx, RuleOperator, "NG/Glo"); err != nil {
			t.Fatal(err)
		}
		if r := reserve(t, g, phone(t, "+2348159990002"), ip("198.18.9.3")); r.Refused != nil {
			t.Fatalf("a new Glo user refused after the lift: %+v", r.Refused)
		}
	})
}

// A spread over every operator of a country stays under each operator's
// budget: the country's own budget catches it.
func TestTheCountryCatchesASpreadOverItsOperators(t *testing.T) {
	eachLayout(t, func(t *testing.T, f *fixture, cluster bool) {
		g := f.guard(t, only(RuleOperator, RuleCountry), cluster)
		ranges := [][]string{gloRanges, mtnRanges, {"+234802", "+234808", "+234812"}, {"+234809", "+234817", "+234818"}}
		admitted := 0
		for i := range 40 {
			r := reserve(t, g, phone(t, spreadOver(ranges[i%len(ranges)], i/len(ranges))), ip(fmt.Sprintf("203.0.%d.9", i)))
			switch {
			case r.Refused == nil:
				admitted++
			case r.Refused.Rule != RuleCountry:
				t.Fatalf("send %d refused by %s %q; want the country", i, r.Refused.Rule, r.Refused.Subject)
			}
		}
		if want := DefaultFloors()[RuleCountry]; admitted != want {
			t.Fatalf("a spread over four operators got %d texts; want the country's floor, %d", admitted, want)
		}
	})
}

// The operator subject of a number: none without prefix data (the US,
// Brazil, Russia), the operator's country's own for a calling code shared
// by several countries (+7, +44), always under the country's hash tag so a
// Cluster decides both in one slot.
func TestOperatorSubjects(t *testing.T) {
	f := newFixture(t)
	g := f.guard(t, nil, false)
	tests := []struct {
		phone, id, tag string
	}{
		{"+2348051234567", "NG/Glo", "pump:{d:NG}:"},
		{"+4917612345678", "DE/O2", "pump:{d:DE}:"},
		{"+77011234567", "KZ/Kcell/Activ", "pump:{d:KZ}:"},
		{"+447797123456", "JE/JT", "pump:{d:JE}:"},
		{"+14155552671", "", ""},
		{"+5511912345678", "", ""},
		{"+79161234567", "", ""},
	}
	for _, tt := range tests {
		var op *subject
		d := g.destination(phone(t, tt.phone))
		for i, s := range d.subjects {
			if s.rule == RuleOperator {
				op = &d.subjects[i]
				if i+1 >= len(d.subjects) || d.subjects[i+1].rule != RuleCountry {
					t.Errorf("%s: the operator is not just before its country", tt.phone)
				}
			}
		}
		switch {
		case tt.id == "" && op != nil:
			t.Errorf("%s: operator subject %q; the number has no operator data", tt.phone, op.id)
		case tt.id != "" && op == nil:
			t.Errorf("%s: no operator subject; want %q", tt.phone, tt.id)
		case op != nil:
			if op.id != tt.id {
				t.Errorf("%s: operator %q, want %q", tt.phone, op.id, tt.id)
			}
			for _, k := range []string{op.key, op.challenged, op.foreign, op.ret} {
				if !strings.HasPrefix(k, f.prefix+tt.tag) || strings.Count(k, "{") != 1 {
					t.Errorf("%s: key %q is not under the country's hash tag %q", tt.phone, k, tt.tag)
				}
			}
		}
	}
}

// Operator names come from data, not from people, but a Redis key or a
// subject id must survive any: braces (another Cluster slot), spaces,
// colons, unicode, control characters, invalid UTF-8, great length.
func TestOperatorNamesAreSafe(t *testing.T) {
	safe := regexp.MustCompile(`^[a-z0-9]{0,24}~[0-9a-f]{16}$`)
	names := []string{"O2", "o-2", "Ø2", "o2 ", "a{b}c", "Kcell/Activ", "T-Mobile", "Bite Latvia", "MTN:x",
		"Télécom", "中国移动", "x\x00y", "x\ny", "bad\xffutf8", "\u202eevil", strings.Repeat("long ", 40)}
	seen := map[string]string{}
	for _, raw := range names {
		name := otp.CleanOperatorName(raw)
		if len(name) > otp.MaxOperatorName || strings.ContainsAny(name, "\x00\n\u202e") || !utf8Valid(name) {
			t.Errorf("%q: display name %q is not clean", raw, name)
		}
		k := operatorKey(name)
		if !safe.MatchString(k) {
			t.Errorf("%q: key part %q is not safe", raw, k)
		}
		if other, ok := seen[k]; ok && other != name {
			t.Errorf("%q and %q share the key %q", other, name, k)
		}
		seen[k] = name
	}
	if otp.CleanOperatorName("  x\n\t y ") != "x y" {
		t.Errorf("spaces not folded: %q", otp.CleanOperatorName("  x\n\t y "))
	}
}

func utf8Valid(s string) bool {
	return strings.ToValidUTF8(s, "\uFFFD") == s && !strings.ContainsRune(s, '\uFFFD')
}
