package pumping

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Two resends to a number already counted are free: a user whose text is
// late is not counted twice. The third and later count in the country as
// new numbers would, until the number's code is approved.
func TestTwoResendsAreFree(t *testing.T) {
	f := newFixture(t)
	g := f.guard(t, func(c *Config) { only(RuleCountry)(c); c.Floors[RuleCountry] = 2 }, false)
	ctx := context.Background()
	a, b := phone(t, "+447400100001"), phone(t, "+447400100002")
	for i := range 3 {
		if r := reserve(t, g, a, ip("198.51.100.1")); r.Refused != nil {
			t.Fatalf("text %d to a refused: %+v", i+1, r.Refused)
		}
	}
	if r := reserve(t, g, b, ip("198.51.100.1")); r.Refused != nil {
		t.Fatal("a second number refused: the free resends counted")
	}
	if r := reserve(t, g, a, ip("198.51.100.1")); r.Refused == nil || r.Refused.Rule != RuleCountry {
		t.Fatalf("a's fourth text with the country at its floor: %+v, want refused by %s", r.Refused, RuleCountry)
	}
	// Once approved, the number is a returning user's, served while the
	// country is restricted, and has its free resends again.
	if err := g.Approved(ctx, a); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if r := reserve(t, g, a, ip("198.51.100.1")); r.Refused != nil {
			t.Fatalf("text %d to a after its approval refused: %+v", i+1, r.Refused)
		}
	}
}

// What a resend counted again is given back when it is not texted, and
// the number's free resends with it.
func TestReleasedResendIsGivenBack(t *testing.T) {
	f := newFixture(t)
	g := f.guard(t, func(c *Config) { only(RuleCountry)(c); c.Floors[RuleCountry] = 2 }, false)
	a := phone(t, "+447400100001")
	for range 3 {
		reserve(t, g, a, ip("198.51.100.1"))
	}
	for i := range 5 {
		r := reserve(t, g, a, ip("198.51.100.1")) // the fourth text: counted again
		if r.Refused != nil {
			t.Fatalf("round %d: the fourth text refused although each was given back: %+v", i, r.Refused)
		}
		if err := g.Release(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if r := reserve(t, g, phone(t, "+447400100002"), ip("198.51.100.1")); r.Refused != nil {
		t.Fatalf("a second number refused after the released resends: %+v", r.Refused)
	}
}

// A handful of numbers admitted once, texted at the phone windows' pace
// (one every six minutes) from a new network each time, nobody verifying:
// with every rule shipped, the resends meet the same budgets new numbers
// do. Before, all 720 of these were texted.
func TestResendsFromRotatingNetworksMeetTheBudgets(t *testing.T) {
	eachLayout(t, func(t *testing.T, f *fixture, cluster bool) {
		g := f.guard(t, nil, cluster)
		admitted := 0
		for k := range 24 {
			for n := range 30 {
				i := k*30 + n
				p := phone(t, fmt.Sprintf("+4474%02d%06d", 10+n*3, 123457+n*7919))
				if r := reserve(t, g, p, ip(fmt.Sprintf("%d.%d.1.7", 20+i/250, i%250))); r.Refused == nil {
					admitted++
				}
			}
			f.advance(6 * time.Minute)
		}
		// The country's floor (10) of numbers, each with its two free
		// resends, and on Cluster a first send per wide network before
		// the replica hears of it.
		if limit := 3 * DefaultFloors()[RuleCountry]; admitted > limit {
			t.Fatalf("%d of 720 texts to 30 numbers nobody verified; want at most %d", admitted, limit)
		}
		t.Logf("%d of 720 texted", admitted)
	})
}

// A free resend is free for the caller's networks too: many real users
// behind one carrier address retry a late text, and their retries used
// to fill its budget. On Cluster the networks' call counts it and is given
// it back once the number's call says it was a resend.
func TestFreeResendsDoNotCountForTheCallersNetworks(t *testing.T) {
	eachLayout(t, func(t *testing.T, f *fixture, cluster bool) {
		g := f.guard(t, only(RuleNet32), cluster) // floor 5
		from := ip("100.15.0.7")
		a := phone(t, "+2348031234567")
		for i := range 3 {
			if r := reserve(t, g, a, from); r.Refused != nil {
				t.Fatalf("text %d to a: %+v", i+1, r.Refused)
			}
		}
		for i := range 4 {
			if r := reserve(t, g, phone(t, fmt.Sprintf("+23480312346%02d", 10+i)), from); r.Refused != nil {
				t.Fatalf("new number %d refused: the resends counted for the address: %+v", i, r.Refused)
			}
		}
		if r := reserve(t, g, phone(t, "+2348031234699"), from); r.Refused == nil || r.Refused.Rule != RuleNet32 {
			t.Fatalf("a sixth number from the address: %+v, want refused by %s", r.Refused, RuleNet32)
		}
	})
}
