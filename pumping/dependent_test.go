package pumping

import (
	"fmt"
	"testing"
)

// A spread over +44 7 reaches Jersey, Guernsey and the Isle of Man without
// aiming at them: a country that shares its calling code with a bigger one
// starts from a fifth of the country floor (at least 2), so a spread over
// the code meets small floors, not one whole floor per territory.
func TestDependentTerritoriesStartFromASmallFloor(t *testing.T) {
	eachLayout(t, func(t *testing.T, f *fixture, cluster bool) {
		g := f.guard(t, only(RuleCountry), cluster)
		tests := []struct {
			name, template string
			want           int
		}{
			{"Jersey", "+447797%06d", 2},
			{"Guernsey", "+447781%06d", 2},
			{"Isle of Man", "+447624%06d", 2},
			{"United Kingdom", "+447400%06d", DefaultFloors()[RuleCountry]},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				admitted := 0
				for i := range 15 {
					p := phone(t, fmt.Sprintf(tt.template, 100003+i*7919))
					r := reserve(t, g, p, ip(fmt.Sprintf("198.51.%d.%d", i, 7+len(tt.name))))
					switch {
					case r.Refused == nil:
						admitted++
					case r.Refused.Rule != RuleCountry:
						t.Fatalf("send %d refused by %s", i, r.Refused.Rule)
					}
				}
				if admitted != tt.want {
					t.Fatalf("%d of 15 unverified sends to %s texted; want %d", admitted, tt.name, tt.want)
				}
			})
		}
	})
}
