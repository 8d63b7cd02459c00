package pumping

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// An operator's ledger of networks known abroad keeps only the hour's
// budget, whose floor is 1. Its travellers who verified through the day
// keep it the room of their average hour, rounded up, so one traveller
// who did not verify leaves room for the next; the one after is still
// refused within the hour.
func TestOperatorTravellersKeepTheirAverageHour(t *testing.T) {
	eachLayout(t, func(t *testing.T, f *fixture, cluster bool) {
		g := abroadGuard(t, f, cluster, func(c *Config) {
			c.Floors[RuleOperator] = DefaultFloors()[RuleOperator]
		})
		n := 0
		traveller := func() string {
			n++
			return spreadOver(gloRanges, n)
		}
		from := func() string { return fmt.Sprintf("203.0.%d.7", 100+n) }
		send := func(number string) bool {
			t.Helper()
			r := reserve(t, g, phone(t, number), ip(from()))
			if r.Refused != nil && r.Refused.Scope != "operator" {
				t.Fatalf("traveller %d refused by %s %q; want the operator or none", n, r.Refused.Rule, r.Refused.Subject)
			}
			return r.Refused == nil
		}
		// On Cluster a replica's first send from the /16 in ten minutes
		// counts in the country's own ledger: prime it.
		prime := func() {
			if cluster {
				send(traveller())
			}
		}
		// Three travellers to Glo who verify, two hours apart.
		for range 3 {
			prime()
			p := traveller()
			if !send(p) {
				t.Fatalf("traveller %d refused with the ledger empty", n)
			}
			if err := g.Approved(context.Background(), phone(t, p)); err != nil {
				t.Fatal(err)
			}
			f.advance(2 * time.Hour)
		}
		// An hour with no approval: one who does not verify, then one
		// served by the average hour's room (1 + ceil(3/24)), then one
		// refused.
		prime()
		for i, want := range []bool{true, true, false} {
			if got := send(traveller()); got != want {
				t.Fatalf("traveller %d of the hour served %v; want %v", i+1, got, want)
			}
			f.advance(5 * time.Minute)
		}
	})
}
