package pumping

import (
	"context"
	"fmt"
	"testing"
)

// TestLiftClearsWider: lifting a hold clears the counts that made it,
// including those of the wider subjects holding the same texts, so the
// next send is not held by the /24 or the block of 1k in its place.
func TestLiftClearsWider(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		rules   []string
		phone   func(i int) string
		from    func(i int) string
		rule    string
		subject string
		// after the lift, this many more sends are admitted
		again int
	}{
		{"net_32 and its /24", []string{RuleNet32, RuleNet24},
			func(i int) string { return fmt.Sprintf("+4474%02d100100", i) }, func(int) string { return "198.51.100.7" },
			RuleNet32, "198.51.100.7", 5},
		{"net_64 and its /56 and /48", []string{RuleNet64, RuleNet56, RuleNet48},
			func(i int) string { return fmt.Sprintf("+4474%02d100100", i) }, func(int) string { return "2001:db8:1:2::7" },
			RuleNet64, "2001:db8:1:2::/64", 5},
		{"range_100 and its block of 1k", []string{RuleRange100, RuleRange1k},
			func(i int) string { return fmt.Sprintf("+4474001000%02d", i) }, func(i int) string { return fmt.Sprintf("198.51.%d.1", i) },
			RuleRange100, "+4474001000xx", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			g := f.guard(t, only(tt.rules...), false)
			n := 0
			next := func() bool {
				t.Helper()
				r := reserve(t, g, phone(t, tt.phone(n)), ip(tt.from(n)))
				n++
				if r.Refused != nil && r.Refused.Rule != tt.rule {
					t.Fatalf("send %d refused by %s, want %s or nothing", n, r.Refused.Rule, tt.rule)
				}
				return r.Refused == nil
			}
			// Held, lifted, held again, lifted again: each lift gives the
			// subject's whole budget back.
			for round := range 3 {
				admitted := 0
				for next() {
					admitted++
					if admitted > 20 {
						t.Fatal("never held")
					}
				}
				if round > 0 && admitted != tt.again {
					t.Fatalf("round %d: %d sends admitted after the lift, want %d", round, admitted, tt.again)
				}
				held, _, err := g.Holds(ctx)
				if err != nil || len(held) != 1 || held[0].Rule != tt.rule || held[0].Subject != tt.subject {
					t.Fatalf("round %d: holds %+v %v", round, held, err)
				}
				if err := g.Lift(ctx, tt.rule, tt.subject); err != nil {
					t.Fatal(err)
				}
				if held, near, err := g.Holds(ctx); err != nil || len(held)+len(near) != 0 {
					t.Fatalf("after the lift: held %+v near %+v %v", held, near, err)
				}
			}
		})
	}
}
