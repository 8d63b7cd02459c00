package pumping

import (
	"context"
	"fmt"
	"testing"

	"smsgw/otp"
)

// A spread from proxies abroad: networks whose users verify codes to
// another country send to this one. Their sends count in the country's
// ledger of networks known abroad, with a third of the country's floor, and
// restricting it leaves the country's own new users served.
// abroadGuard is a guard with only the country and the signal levels of the
// network rules on, the country's floor 6 (abroad: 2), and 203.0.0.0/16
// known for British users: 20 of them verified their codes there.
func abroadGuard(t *testing.T, f *fixture, cluster bool, more ...func(*Config)) *Guard {
	t.Helper()
	g := f.guard(t, func(c *Config) {
		only(RuleCountry, RuleNet24, RuleNet16, RuleNet48, RuleNet6x32)(c)
		c.Floors[RuleCountry] = 6
		for _, m := range more {
			m(c)
		}
	}, cluster)
	for i := range 20 {
		gb := phone(t, fmt.Sprintf("+4474005551%02d", i))
		if r := reserve(t, g, gb, ip(fmt.Sprintf("203.0.%d.5", i))); r.Refused != nil {
			t.Fatalf("a British user refused: %+v", r.Refused)
		}
		if err := g.Approved(context.Background(), gb); err != nil {
			t.Fatal(err)
		}
	}
	return g
}

func TestNetworksKnownAbroadCountApart(t *testing.T) {
	eachLayout(t, func(t *testing.T, f *fixture, cluster bool) {
		// The /16 is known for British users, whatever one American
		// traveller there does.
		g := abroadGuard(t, f, cluster)
		ctx := context.Background()
		// Proxies in that /16 spread over US numbers. On Cluster the
		// caller's networks are another call: the first send, before
		// this replica has heard what the /16 is known for, counts in
		// the country's own ledger.
		want := 2
		if cluster {
			want = 3
		}
		admitted := 0
		for i := range 12 {
			r := reserve(t, g, phone(t, fmt.Sprintf("+1650%07d", 2530000+i*7919)), ip(fmt.Sprintf("203.0.%d.9", 10+i)))
			switch {
			case r.Refused == nil:
				admitted++
			case r.Refused.Rule != RuleCountry:
				t.Fatalf("send %d from abroad refused by %s", i, r.Refused.Rule)
			}
		}
		if admitted != want {
			t.Fatalf("the spread from abroad got %d texts; want a third of the country's floor, 2 (and on Cluster the first)", admitted)
		}
		// The country's own new users, from networks nobody knows yet,
		// are still served: the country is not restricted.
		for i := range 3 {
			if r := reserve(t, g, phone(t, fmt.Sprintf("+1415%07d", 5550000+i*104729)), ip(fmt.Sprintf("198.18.%d.1", i))); r.Refused != nil {
				t.Fatalf("a new American user refused during a spread from abroad: %+v", r.Refused)
			}
		}
		held, _, err := g.Holds(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var us *otp.CountryRestriction
		for _, h := range held {
			if h.Rule == RuleCountry && h.Subject == "US" {
				us = h.Restricted
			}
		}
		if us == nil || !us.Abroad || us.Unverified != 3 || us.Budget != 2 || us.Refused != int64(12-want) {
			t.Fatalf("US listed as %+v; want restricted for networks abroad, 3 unverified of 2 earned, %d refused", us, 12-want)
		}
		// An approval brings the ledger back under its budget; the
		// restriction holds until restrict_for has passed.
		if err := g.Approved(ctx, phone(t, fmt.Sprintf("+1650%07d", 2530000+1*7919))); err != nil {
			t.Fatal(err)
		}
		late := phone(t, "+12125550199")
		if r := reserve(t, g, late, ip("203.0.99.9")); r.Refused == nil || r.Refused.Rule != RuleCountry {
			t.Fatalf("a send from abroad while its ledger is restricted: %+v", r.Refused)
		}
		// Sends from abroad still arriving keep it restricted past
		// restrict_for from the trip. On Cluster this replica's memory of
		// the /16 (10 minutes) has lapsed by then: its first send counts
		// in the country's own ledger, as before it first heard; the next
		// meets the restriction.
		stillHeld := func(addr string, i int) bool {
			r := reserve(t, g, late, ip(addr))
			if cluster && r.Refused == nil {
				r = reserve(t, g, phone(t, fmt.Sprintf("+1212555%04d", 100+i)), ip(addr))
			}
			return r.Refused != nil
		}
		f.advance(DefaultConfig().RestrictFor * 2 / 3)
		if !stillHeld("203.0.98.9", 1) {
			t.Fatal("a send from abroad served while its ledger is restricted")
		}
		f.advance(DefaultConfig().RestrictFor * 2 / 3)
		if !stillHeld("203.0.97.9", 2) {
			t.Fatal("the restriction ended restrict_for after the trip although sends from abroad kept arriving")
		}
		f.advance(DefaultConfig().RestrictFor)
		if r := reserve(t, g, late, ip("203.0.99.9")); r.Refused != nil {
			t.Fatalf("a send from abroad after the restriction, the ledger under budget: %+v", r.Refused)
		}
	})
}

// What a send from abroad counted is given back when it is not texted, and
// credited when its code is approved: the ledger earns room as the
// country's does.
func TestNetworksKnownAbroadReleaseAndApprove(t *testing.T) {
	f := newFixture(t)
	g := f.guard(t, func(c *Config) {
		only(RuleCountry, RuleNet24, RuleNet16, RuleNet48, RuleNet6x32)(c)
		c.Floors[RuleCountry] = 6
	}, false)
	ctx := context.Background()
	// Two /16s whose users verify British codes.
	for i := range 4 {
		gb := phone(t, fmt.Sprintf("+4474005551%02d", i))
		reserve(t, g, gb, ip(fmt.Sprintf("203.%d.0.5", i%2)))
		if err := g.Approved(ctx, gb); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 6 {
		r := reserve(t, g, phone(t, fmt.Sprintf("+1650%07d", 2530000+i*7919)), ip(fmt.Sprintf("203.0.%d.9", 10+i)))
		if r.Refused != nil {
			t.Fatalf("send %d refused by %s although each was released", i, r.Refused.Rule)
		}
		if err := g.Release(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// Travellers in the first /16 verify: the first is counted in the
	// ledger and its approval earns the ledger a text of room, as the
	// country's do; it also makes that /16 sign for the next two.
	for i := range 3 {
		p := phone(t, fmt.Sprintf("+1415%07d", 5550000+i*104729))
		if r := reserve(t, g, p, ip(fmt.Sprintf("203.0.%d.9", 30+i))); r.Refused != nil {
			t.Fatalf("traveller %d refused: %+v", i, r.Refused)
		}
		if err := g.Approved(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	admitted := 0
	for i := range 10 {
		if r := reserve(t, g, phone(t, fmt.Sprintf("+1212%07d", 5550000+i*104729)), ip(fmt.Sprintf("203.1.%d.9", 50+i))); r.Refused == nil {
			admitted++
		}
	}
	// The second /16 is still known abroad only: the ledger's floor, 2,
	// plus the approval of the last hour.
	if admitted != 3 {
		t.Fatalf("after an approval the second /16 got %d texts; want the ledger's floor 2 plus 1 earned", admitted)
	}
}

// A restriction of the ledger of networks known abroad is renewed by the
// sends from abroad it meets even while the country's own restriction is
// the one refusing them: when the country's lapses, the spread's does not.
func TestAbroadRestrictionOutlastsTheCountrys(t *testing.T) {
	f := newFixture(t)
	g := abroadGuard(t, f, false)
	ctx := context.Background()
	abroad := func(i int) otp.PumpingReservation {
		return reserve(t, g, phone(t, fmt.Sprintf("+1650%07d", 2530000+i*7919)), ip(fmt.Sprintf("203.0.%d.9", 100+i)))
	}
	for i := range 5 { // two texted, the third refusal restricts the abroad ledger
		if r := abroad(i); (r.Refused != nil) != (i >= 2) {
			t.Fatalf("send %d from abroad: %+v", i, r.Refused)
		}
	}
	restrict := DefaultConfig().RestrictFor
	f.advance(restrict / 6)
	for i := range 7 { // six texted, the seventh restricts the country itself
		r := reserve(t, g, phone(t, fmt.Sprintf("+1415%07d", 5550000+i*104729)), ip(fmt.Sprintf("198.18.%d.1", i)))
		if (r.Refused != nil) != (i == 6) {
			t.Fatalf("send %d from an unknown network: %+v", i, r.Refused)
		}
	}
	f.advance(restrict * 2 / 3) // both restricted; the abroad ledger's first hour nearly over
	if err := g.Approved(ctx, phone(t, fmt.Sprintf("+1650%07d", 2530000))); err != nil {
		t.Fatal(err) // one of its texts verifies: it is under its budget again
	}
	if r := abroad(5); r.Refused == nil {
		t.Fatal("a send from abroad served while the country is restricted")
	}
	f.advance(restrict / 3) // the country's restriction is over, the abroad ledger's first one too
	if r := abroad(6); r.Refused == nil {
		t.Fatal("the spread from abroad was served again once the country's own restriction lapsed")
	}
}

// Travellers come in bursts: a ledger of networks known abroad over its
// budget refuses the sends over it, but is restricted only at the third
// such refusal within an hour, so an approval gives the next traveller
// room at once.
func TestAbroadLedgerRestrictsAtTheThirdRefusal(t *testing.T) {
	f := newFixture(t)
	g := abroadGuard(t, f, false)
	ctx := context.Background()
	travellers := make([]otp.Phone, 5)
	for i := range travellers {
		travellers[i] = phone(t, fmt.Sprintf("+1650%07d", 2530000+i*7919))
	}
	for i, p := range travellers[:3] { // the ledger's floor, 2, then one over
		if r := reserve(t, g, p, ip(fmt.Sprintf("203.0.%d.9", 100+i))); (r.Refused != nil) != (i == 2) {
			t.Fatalf("traveller %d: %+v", i, r.Refused)
		}
	}
	held, _, err := g.Holds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range held {
		if h.Restricted != nil {
			t.Fatalf("one send over the budget restricted %s: %+v", h.Subject, h.Restricted)
		}
	}
	if err := g.Approved(ctx, travellers[0]); err != nil {
		t.Fatal(err)
	}
	if r := reserve(t, g, travellers[3], ip("203.0.110.9")); r.Refused != nil {
		t.Fatalf("a traveller after an approval gave the ledger room: %+v", r.Refused)
	}
}

// In shadow mode nothing is refused, so the refusals that restrict a
// ledger of networks known abroad are counted by sends served: the
// restriction is still recorded, for the console to show what enforcing
// would do.
func TestAbroadLedgerRestrictsInShadowMode(t *testing.T) {
	f := newFixture(t)
	g := abroadGuard(t, f, false, func(c *Config) { c.Mode = ModeShadow })
	for i := range 5 { // the floor, 2, then three over it
		r := reserve(t, g, phone(t, fmt.Sprintf("+1650%07d", 2530000+i*7919)), ip(fmt.Sprintf("203.0.%d.9", 100+i)))
		if r.Refused != nil {
			t.Fatalf("send %d refused in shadow mode: %+v", i, r.Refused)
		}
	}
	v, err := f.rdb.HMGet(context.Background(), f.prefix+"pump:{d:US}:cf", fieldRestrictedSince, fieldRestrictedUntil).Result()
	if err != nil {
		t.Fatal(err)
	}
	if v[0] == nil || v[1] == nil {
		t.Fatalf("the ledger of networks known abroad: rs rx = %v, want restricted at its third send over budget", v)
	}
}
