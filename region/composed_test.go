package region

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"smsgw/otp"
	"smsgw/pumping"
)

// A keyed send refused here (its address's window, the caller's
// networks) claims at its home first, in a composed call of the claim
// alone: a replay is answered, a duplicate in flight waited for, and only
// a request that claimed is refused. One request crosses; nothing is
// counted at home.
func TestKeyedSendRefusedHereClaimsAtHomeFirst(t *testing.T) {
	ctx := context.Background()
	const raw = "+14155550301" // homed in b
	keyed := func(raw, key, ip string, ipMax int) otp.Admission {
		adm := admissionOf(t, raw, "US", ip, 3, ipMax)
		adm.Scope, adm.ClaimTTL = otp.SendScope(raw, key), time.Minute
		return adm
	}
	answer := []byte(`{"request_id":"r1"}`)
	// check sends adm, refused here, and wants the claim want (with its
	// stored answer prior); a refusal, by the windows or the pumping guard,
	// only once claimed.
	check := func(t *testing.T, p pair, a otp.SendAdmitter, adm otp.Admission, want otp.Claim, prior []byte, pumped bool) {
		t.Helper()
		before := p.aToB.Requests()
		got, err := a.Admit(ctx, adm)
		if err != nil || got.Claim != want || string(got.Prior) != string(prior) || got.Issued {
			t.Fatalf("Admit: %+v, %v; want claim %v, nothing issued", got, err, want)
		}
		refused := (got.Limited && !got.Decision.Allowed) || got.Pumping.Refused != nil
		if refused != (want == otp.Claimed) {
			t.Fatalf("Admit: %+v; want refused only when claimed", got)
		}
		if want == otp.Claimed && pumped != (got.Pumping.Refused != nil) {
			t.Fatalf("Admit: %+v; want a pumping refusal %v", got, pumped)
		}
		if n := p.aToB.Requests() - before; n != 1 {
			t.Fatalf("the send made %d requests to its home, want 1 (the claim)", n)
		}
		ws, err := p.b.local.Limiter.Status(ctx, adm.Subjects[:1])
		if err != nil || (adm.Phone.E164 == raw) != (ws[0].Used == 1) || ws[0].Used > 1 {
			t.Fatalf("the number's window at home: %+v, %v; want the first send only", ws, err)
		}
	}
	// held checks that scope is now held.
	held := func(t *testing.T, d *Deployment, scope string) {
		t.Helper()
		if c, _, err := d.Idempotency().Claim(ctx, scope, ticket(), time.Minute); err != nil || c != otp.ClaimBusy {
			t.Fatalf("another request's claim: %v, %v; want ClaimBusy", c, err)
		}
	}

	t.Run("by the address's window", func(t *testing.T) {
		p := newPair(t, 0)
		a := admitterOf(t, p.a)
		const ip = "192.0.2.30"
		first := keyed(raw, "k1", ip, 1)
		if got, err := a.Admit(ctx, first); err != nil || !admitted(got) {
			t.Fatalf("first send: %+v, %v", got, err)
		}
		if err := p.a.Idempotency().Settle(ctx, first.Scope, first.Ticket, answer, time.Minute); err != nil {
			t.Fatal(err)
		}
		// Another request holds k2, in flight.
		if c, _, err := p.a.Idempotency().Claim(ctx, otp.SendScope(raw, "k2"), ticket(), time.Minute); err != nil || c != otp.Claimed {
			t.Fatalf("claim k2: %v, %v", c, err)
		}
		check(t, p, a, keyed(raw, "k1", ip, 1), otp.ClaimDone, answer, false)
		check(t, p, a, keyed(raw, "k2", ip, 1), otp.ClaimBusy, nil, false)
		fresh := keyed("+14155550302", "k3", ip, 1)
		check(t, p, a, fresh, otp.Claimed, nil, false)
		held(t, p.a, fresh.Scope)
		ws, err := p.a.local.Limiter.Status(ctx, first.Subjects[1:])
		if err != nil || ws[0].Used != 1 {
			t.Fatalf("the address's window: %+v, %v; want the first send only", ws, err)
		}
	})

	t.Run("by the caller's networks", func(t *testing.T) {
		p := newPair(t, 0)
		a := admitterConfig(t, p.a, func(c *pumping.Config) { c.Floors = map[string]int{pumping.RuleNet32: 1} })
		const ip = "198.51.100.30"
		first := keyed(raw, "p1", ip, 1000)
		if got, err := a.Admit(ctx, first); err != nil || !admitted(got) {
			t.Fatalf("first send: %+v, %v", got, err)
		}
		if err := p.a.Idempotency().Settle(ctx, first.Scope, first.Ticket, answer, time.Minute); err != nil {
			t.Fatal(err)
		}
		check(t, p, a, keyed(raw, "p1", ip, 1000), otp.ClaimDone, answer, false)
		fresh := keyed("+14155550312", "p2", ip, 1000)
		check(t, p, a, fresh, otp.Claimed, nil, true)
		held(t, p.a, fresh.Scope)
		ws, err := p.a.local.Limiter.Status(ctx, first.Subjects[1:])
		if err != nil || ws[0].Used != 1 {
			t.Fatalf("the address's window: %+v, %v; want the first send only", ws, err)
		}
	})
}

// A send whose number's home holds none of its windows (no per-number
// window configured) is still one composed call there: the claim, the
// pumping record and the code; its address's window bounds it.
func TestAdmitterWithNoWindowAtHome(t *testing.T) {
	ctx := context.Background()
	p := newPair(t, 0)
	a := admitterOf(t, p.a)
	const raw = "+14155550321" // homed in b
	warm := admissionOf(t, "+14155550329", "US", "192.0.2.39", 3, 1000)
	if _, err := a.Admit(ctx, warm); err != nil {
		t.Fatal(err)
	}
	adm := admissionOf(t, raw, "US", "192.0.2.32", 3, 2)
	adm.Subjects = adm.Subjects[1:] // the address's only
	adm.Scope, adm.ClaimTTL = otp.SendScope(raw, "n1"), time.Minute
	before := p.aToB.Requests()
	got, err := a.Admit(ctx, adm)
	if err != nil || !admitted(got) {
		t.Fatalf("Admit: %+v, %v; want admitted", got, err)
	}
	if n := p.aToB.Requests() - before; n != 1 {
		t.Fatalf("the send made %d requests to its home, want 1", n)
	}
	if tw := got.Decision.Tightest; tw.Scope != "ip" || tw.Rule.Max != 2 || tw.Used != 1 {
		t.Fatalf("the bounding window: %+v; want the address's, 1 of 2 used", tw)
	}
	if _, ok, err := p.b.local.Codes.Pending(ctx, raw); err != nil || !ok {
		t.Fatalf("no code pending at home (%v)", err)
	}
	if c, _, err := p.a.Idempotency().Claim(ctx, adm.Scope, ticket(), time.Minute); err != nil || c != otp.ClaimBusy {
		t.Fatalf("the scope at home: %v, %v; want held", c, err)
	}
}

// A window homed in a third region (never one of otp's subjects: each
// homed one is the number's) is decided there for good at the same time
// as the number's home's composed call, as a previous home's during a
// move: races from every region admit exactly its max, and its home's
// window holds exactly the admitted sends.
func TestAdmitterWithAWindowInAThirdHome(t *testing.T) {
	ctx := context.Background()
	const limit = 3
	homes := NewHomes(1, "b", map[string]string{"GB": "a"}, nil)
	m := newMesh(t, 0, map[string]Homes{"a": homes, "b": homes, "c": homes})
	admitters := map[string]otp.SendAdmitter{}
	for _, n := range meshNames {
		admitters[n] = admitterOf(t, m.regions[n])
	}
	gb := otp.Subject{Scope: "country", Key: "send:country:GB", Country: "GB", Rules: []otp.Rule{{Window: time.Hour, Max: limit}}}
	send := func(i int) otp.Admission {
		adm := admissionOf(t, fmt.Sprintf("+1415555%04d", 4000+i), "US", fmt.Sprintf("192.0.2.%d", 10+i), 3, 1000)
		adm.Subjects = append(adm.Subjects, gb)
		return adm
	}
	var n atomic.Int64
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Go(func() {
			got, err := admitters[meshNames[i%3]].Admit(ctx, send(i))
			if err != nil {
				t.Error(err)
			}
			if admitted(got) {
				n.Add(1)
			}
		})
	}
	wg.Wait()
	if n.Load() != limit {
		t.Fatalf("admitted %d, want exactly %d", n.Load(), limit)
	}
	ws, err := m.regions["a"].local.Limiter.Status(ctx, []otp.Subject{gb})
	if err != nil || ws[0].Used != limit {
		t.Fatalf("the third home's window: %+v, %v; want %d", ws, err, limit)
	}
}

// Every pumping configuration a deployment runs admits a send to a remote
// home in the composed call, from IPv4 and IPv6, with and without bypass
// (pumping's TestHomeDecisionIsAlwaysOneCall sweeps the same at the
// guard: the home is always told a caller signal).
func TestAdmitterKnowsTheCallersSignal(t *testing.T) {
	ctx := context.Background()
	p := newPair(t, 0)
	for i, tc := range []struct {
		name string
		edit func(*pumping.Config)
	}{
		{"enforce", func(*pumping.Config) {}},
		{"shadow", func(c *pumping.Config) { c.Mode = pumping.ModeShadow }},
		{"off, with a spend ceiling", func(c *pumping.Config) {
			c.Mode, c.Spend = pumping.ModeOff, pumping.Spend{Default: 0.05, Day: 1000}
		}},
		{"no network sign", func(c *pumping.Config) {
			for _, r := range []string{pumping.RuleNet16, pumping.RuleNet24, pumping.RuleNet48, pumping.RuleNet6x32} {
				delete(c.Floors, r)
			}
		}},
		{"networks only", func(c *pumping.Config) { c.Floors = map[string]int{pumping.RuleNet24: 5, pumping.RuleNet16: 5} }},
		{"a spend ceiling", func(c *pumping.Config) { c.Spend = pumping.Spend{Default: 0.05, Hour: 10, Day: 1000} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := admitterConfig(t, p.a, tc.edit)
			for j, ip := range []string{fmt.Sprintf("203.0.113.%d", 10+i), fmt.Sprintf("2001:db8:%x::1", 10+i)} {
				adm := admissionOf(t, fmt.Sprintf("+1415555%02d%02d", 50+i, j), "US", ip, 3, 1000)
				adm.Bypass = j == 1
				got, err := a.Admit(ctx, adm)
				// Enforced, the numbers' shared ranges may refuse: still
				// answered by the composed call.
				if err != nil || !(admitted(got) || got.Pumping.Refused != nil) {
					t.Fatalf("Admit from %s: %+v, %v; want an answer of the composed call", ip, got, err)
				}
			}
		})
	}
}
