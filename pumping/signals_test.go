package pumping

import (
	"fmt"
	"testing"
)

// On Cluster a send with no network rule to ask about is one call: a
// restricted country decides it there and then, never "ask again", which
// once let every such send through uncounted.
func TestRestrictedCountryWithNothingToAskOnCluster(t *testing.T) {
	f := newFixture(t)
	g := f.guard(t, func(c *Config) {
		only(RuleCountry)(c)
		c.Floors[RuleCountry] = 2
	}, true)
	admitted := 0
	for i := range 8 {
		r := reserve(t, g, phone(t, fmt.Sprintf("+4477%08d", 10_000_000+i*123_457)), ip(fmt.Sprintf("10.%d.0.1", i)))
		switch {
		case r.Refused == nil:
			admitted++
		case r.Refused.Rule != RuleCountry:
			t.Fatalf("send %d refused by %s", i, r.Refused.Rule)
		}
	}
	if admitted != 2 {
		t.Fatalf("%d of 8 admitted with the country's floor at 2", admitted)
	}
}
