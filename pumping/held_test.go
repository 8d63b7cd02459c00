package pumping

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// A country's refusals stop the approvals that earned its room. On a
// launch day its room is mostly the hour's (hour_factor × the last hour's
// approvals), so once its restriction lapsed the window's budget had
// fallen under the attack's unverified texts, and every new user tripped
// it again until they left the window. The window's budget at the trip is
// held for a window: the country serves its new users again once the
// restriction lapses, and a spread that comes back meets the hour's
// horizon.
func TestARestrictionHoldsTheWindowsBudgetItTrippedAt(t *testing.T) {
	eachLayout(t, func(t *testing.T, f *fixture, cluster bool) {
		g := f.guard(t, only(RuleCountry), cluster)
		ctx := context.Background()
		n := 0
		number := func(n int) string { return fmt.Sprintf("+1650%07d", 2000003+(n*7919)%7000000) }
		send := func() bool {
			t.Helper()
			n++
			r := reserve(t, g, phone(t, number(n)), ip(fmt.Sprintf("198.18.%d.%d", n/250, n%250+1)))
			if r.Refused != nil && r.Refused.Rule != RuleCountry {
				t.Fatalf("send %d refused by %s", n, r.Refused.Rule)
			}
			return r.Refused == nil
		}
		// The first hour: 25 new users who verify, then a spread nobody
		// verifies, until the hour's horizon (10 + 25) trips.
		for range 25 {
			if !send() {
				t.Fatalf("new user %d refused", n)
			}
			if err := g.Approved(ctx, phone(t, number(n))); err != nil {
				t.Fatal(err)
			}
		}
		spread := 0
		for send() {
			if spread++; spread > 100 {
				t.Fatal("the spread was never refused")
			}
		}
		if spread != 35 {
			t.Fatalf("the spread got %d texts; want the hour's budget, 35", spread)
		}
		// Three hours on, the restriction lapsed and the spread's texts
		// left the hour: the window's budget is the trip's, 10 + 4 × 25.
		f.advance(3 * time.Hour)
		for i := range 5 {
			if !send() {
				t.Fatalf("new user %d after the restriction lapsed refused", i)
			}
		}
		// A spread that comes back meets the hour's horizon, 10.
		back := 0
		for send() {
			if back++; back > 50 {
				t.Fatal("the returning spread was never refused")
			}
		}
		if back != 10-5 {
			t.Fatalf("the returning spread got %d texts; want the hour's floor less the 5 users', 5", back)
		}
	})
}
