package region

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"smsgw/internal/redistopo"
	"smsgw/internal/testenv"
	"smsgw/otp"
)

// mesh is three regions, each on a Redis of the test's own, each reaching
// the others' through a cut-able proxy.
type mesh struct {
	regions map[string]*Deployment
	links   map[string]*testenv.Proxy // "c->a": c's connection to a's Redis
}

var meshNames = []string{"a", "b", "c"}

// newMesh builds the regions, each with its own table of homes.
func newMesh(t *testing.T, fallback int, homes map[string]Homes) mesh {
	t.Helper()
	addrs := map[string]string{}
	for _, n := range meshNames {
		addrs[n] = redistopo.StartSingle(t).Addr
	}
	m := mesh{regions: map[string]*Deployment{}, links: map[string]*testenv.Proxy{}}
	for _, from := range meshNames {
		local := store(t, from, addrs[from])
		var remote []Store
		for _, to := range meshNames {
			if to != from {
				p := testenv.NewDelayProxy(t, addrs[to], 5*time.Millisecond)
				m.links[from+"->"+to] = p
				remote = append(remote, store(t, to, p.Addr()))
			}
		}
		m.regions[from] = deploy(homes[from], fallback, local, remote...)
	}
	return m
}

// carryAll carries every region's fallback admissions home.
func (m mesh) carryAll(t *testing.T) {
	t.Helper()
	for _, d := range m.regions {
		for i := range d.o.Remote {
			if _, err := d.carryOnce(context.Background(), &d.o.Remote[i]); err != nil {
				t.Fatalf("carry to %s: %v", d.o.Remote[i].Name, err)
			}
		}
	}
}

// While GB moves from a to b, with a fallback allowed and links cut at
// each step of the move, no more than L + (R-1)·F sends are admitted in a
// window, and once healed the home that sees every admission at that step
// (a until the previous home is dropped anywhere, b after) holds them all.
func TestFallbackDuringAMove(t *testing.T) {
	const limit, fallback = 3, 1
	bound := limit + (len(meshNames)-1)*fallback
	old := NewHomes(1, "b", map[string]string{"GB": "a"}, nil)
	moving := NewHomes(2, "b", map[string]string{"GB": "b"}, map[string]string{"GB": "a"})
	moved := NewHomes(2, "b", map[string]string{"GB": "b"}, nil)
	for _, tc := range []struct {
		name    string
		homes   map[string]Homes
		cut     []string
		want    int    // admitted, sending in turn from a, b, c
		witness string // the home whose window sees them all once healed
	}{
		{"step 1 half rolled out, new table cut from the old home",
			map[string]Homes{"a": old, "b": moving, "c": old}, []string{"b->a"}, limit + fallback, "a"},
		{"step 1 done, a region cut from both homes",
			map[string]Homes{"a": moving, "b": moving, "c": moving}, []string{"c->a", "c->b"}, limit + fallback, "a"},
		{"step 1 done, the two homes cut apart",
			map[string]Homes{"a": moving, "b": moving, "c": moving}, []string{"a->b", "b->a"}, limit + fallback, "a"},
		{"step 3 half rolled out, a region still moving cut from the new home",
			map[string]Homes{"a": moving, "b": moved, "c": moved}, []string{"a->b"}, limit + fallback, "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			m := newMesh(t, fallback, tc.homes)
			phone := subjects("+447400123456", "GB", "192.0.2.1", limit, 1000)
			for _, l := range tc.cut {
				m.links[l].Cut()
			}
			admitted := 0
			for i := range 30 {
				d := m.regions[meshNames[i%len(meshNames)]]
				dec, err := d.Limiter().Allow(ctx, ticket(), phone)
				if err != nil {
					t.Fatalf("send %d through %s: %v", i, d.o.Local.Name, err)
				}
				if dec.Allowed {
					admitted++
				}
			}
			if admitted > bound || admitted != tc.want {
				t.Fatalf("admitted %d while cut (%v), want %d (bound L + (R-1)·F = %d)", admitted, tc.cut, tc.want, bound)
			}
			for _, l := range tc.cut {
				m.links[l].Heal()
			}
			m.carryAll(t)
			ws, err := m.regions[tc.witness].local.Limiter.Status(ctx, phone[:1])
			if err != nil {
				t.Fatal(err)
			}
			if ws[0].Used != admitted {
				t.Fatalf("home %s's window holds %d after healing, want every admission (%d)", tc.witness, ws[0].Used, admitted)
			}
		})
	}
}

// A keyed send during a move with one of its homes out of reach is still
// one composed call: the previous home cut, its windows are decided on the
// fallback ledger once the new home admitted; the new home cut, its
// composed call runs here over the fallback stores, the previous home's
// windows at once. A second send, past the fallback allowance, holds
// nothing in the home that answers; healed, the carry brings the cut home
// its admission.
func TestKeyedSendDuringAMoveCutFromAHome(t *testing.T) {
	ctx := context.Background()
	moving := NewHomes(2, "b", map[string]string{"GB": "b"}, map[string]string{"GB": "a"})
	for _, tc := range []struct{ name, cut, reached string }{
		{"the previous home cut", "c->a", "b"},
		{"the new home cut", "c->b", "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMesh(t, 1, map[string]Homes{"a": moving, "b": moving, "c": moving})
			c := admitterOf(t, m.regions["c"])
			m.links[tc.cut].Cut()
			const raw = "+447400128301"
			keyed := func(key, ip string) otp.Admission {
				adm := admissionOf(t, raw, "GB", ip, 3, 1000)
				adm.Scope, adm.ClaimTTL = otp.SendScope(raw, key), time.Minute
				return adm
			}
			adm := keyed("signup-2", "192.0.2.220")
			if got, err := c.Admit(ctx, adm); err != nil || !admitted(got) {
				t.Fatalf("Admit with %s cut: %+v, %v; want admitted", tc.cut, got, err)
			}
			if n := m.regions["c"].Fallbacks(); n != 1 {
				t.Fatalf("%d fallback admissions, want 1", n)
			}
			if got, _, err := m.regions["c"].Idempotency().Claim(ctx, adm.Scope, ticket(), time.Minute); err != nil || got != otp.ClaimBusy {
				t.Fatalf("another request's claim: %v, %v; want ClaimBusy", got, err)
			}
			if _, ok, err := m.regions["c"].Codes().Pending(ctx, raw); err != nil || !ok {
				t.Fatalf("no code pending (%v)", err)
			}
			got, err := c.Admit(ctx, keyed("signup-3", "192.0.2.221"))
			if err != nil || got.Claim != otp.Claimed || !got.Limited || got.Decision.Allowed {
				t.Fatalf("a second send past F: %+v, %v; want refused", got, err)
			}
			ws, err := m.regions[tc.reached].local.Limiter.Status(ctx, adm.Subjects[:1])
			if err != nil || ws[0].Used != 1 {
				t.Fatalf("home %s's window: %+v, %v; want the first send only", tc.reached, ws, err)
			}
			m.links[tc.cut].Heal()
			m.carryAll(t)
			for _, home := range []string{"a", "b"} {
				ws, err := m.regions[home].local.Limiter.Status(ctx, adm.Subjects[:1])
				if err != nil || ws[0].Used != 1 {
					t.Fatalf("home %s's window once healed: %+v, %v; want the admitted send", home, ws, err)
				}
			}
		})
	}
}

// A code issued under fallback during a move, or by the old home, verifies
// while the new home is out of reach.
func TestCodesDuringAMoveWithTheNewHomeCut(t *testing.T) {
	ctx := context.Background()
	moving := NewHomes(2, "b", map[string]string{"GB": "b"}, map[string]string{"GB": "a"})
	old := NewHomes(1, "b", map[string]string{"GB": "a"}, nil)
	m := newMesh(t, 1, map[string]Homes{"a": old, "b": moving, "c": moving})
	issued := otp.StoredCode{MAC: []byte("old"), Sealed: []byte("sealed")}
	if _, err := m.regions["a"].Codes().Issue(ctx, "+447400123457", issued, time.Minute); err != nil {
		t.Fatal(err)
	}
	m.links["c->b"].Cut()
	if _, err := m.regions["c"].Codes().Issue(ctx, "+447400123458", otp.StoredCode{MAC: []byte("fb"), Sealed: []byte("sealed")}, time.Minute); err != nil {
		t.Fatalf("issue with the new home cut: %v", err)
	}
	for _, tc := range []struct{ name, phone, mac string }{
		{"issued by the old home", "+447400123457", "old"},
		{"issued under fallback", "+447400123458", "fb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if res, _, err := m.regions["c"].Codes().Check(ctx, tc.phone, []byte(tc.mac), 5); err != nil || res != otp.CodeApproved {
				t.Fatalf("check through c, cut from the new home: %v %v", res, err)
			}
		})
	}
}

// While GB moves from a to b, a send is one round trip from every region:
// the new home's composed call and the previous home's windows at once.
// Races from the three regions (a: previous home, b: new home, c: neither)
// admit exactly the limit, and both homes' windows hold every admission.
func TestAdmitterDuringAMove(t *testing.T) {
	ctx := context.Background()
	const limit = 3
	moving := NewHomes(2, "b", map[string]string{"GB": "b"}, map[string]string{"GB": "a"})
	m := newMesh(t, 0, map[string]Homes{"a": moving, "b": moving, "c": moving})
	admitters := map[string]otp.SendAdmitter{}
	for _, n := range meshNames {
		admitters[n] = admitterOf(t, m.regions[n])
	}
	// The first sends load the scripts in each region.
	for i, n := range meshNames {
		if got, err := admitters[n].Admit(ctx, admissionOf(t, fmt.Sprintf("+44740012%04d", 9000+i), "GB", "192.0.2.200", limit, 1000)); err != nil || !admitted(got) {
			t.Fatalf("first send through %s: %+v, %v", n, got, err)
		}
	}

	t.Run("one request to each home, at once", func(t *testing.T) {
		before := map[string]int64{"c->a": m.links["c->a"].Requests(), "c->b": m.links["c->b"].Requests()}
		got, err := admitters["c"].Admit(ctx, admissionOf(t, "+447400128001", "GB", "192.0.2.201", limit, 1000))
		if err != nil || !admitted(got) {
			t.Fatalf("Admit: %+v, %v", got, err)
		}
		for l, n := range before {
			if d := m.links[l].Requests() - n; d != 1 {
				t.Fatalf("%s carried %d requests for the send, want 1", l, d)
			}
		}
	})

	t.Run("with an Idempotency-Key: one request to each home, a duplicate counts nothing, a replay answers", func(t *testing.T) {
		const raw = "+447400128201"
		scope := otp.SendScope(raw, "signup-1")
		keyed := func(ip string) otp.Admission {
			adm := admissionOf(t, raw, "GB", ip, limit, 1000)
			adm.Scope, adm.ClaimTTL = scope, time.Minute
			return adm
		}
		first := keyed("192.0.2.210")
		for _, tc := range []struct {
			name   string
			from   string
			adm    otp.Admission
			settle []byte // the first send's answer, stored before
			want   otp.Claim
		}{
			{"the first, from neither home", "c", first, nil, otp.Claimed},
			{"a duplicate in flight, from the previous home", "a", keyed("192.0.2.211"), nil, otp.ClaimBusy},
			{"a duplicate in flight, from neither home", "c", keyed("192.0.2.212"), nil, otp.ClaimBusy},
			{"a replay once answered", "c", keyed("192.0.2.213"), []byte(`{"request_id":"r1"}`), otp.ClaimDone},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if tc.settle != nil {
					if err := m.regions["c"].Idempotency().Settle(ctx, scope, first.Ticket, tc.settle, time.Minute); err != nil {
						t.Fatal(err)
					}
				}
				before := map[string]int64{"c->a": m.links["c->a"].Requests(), "c->b": m.links["c->b"].Requests()}
				got, err := admitters[tc.from].Admit(ctx, tc.adm)
				checkKeyedAnswer(t, got, err, tc.want, tc.settle)
				if tc.want == otp.Claimed {
					for l, n := range before {
						if d := m.links[l].Requests() - n; d != 1 {
							t.Fatalf("%s carried %d requests for the send, want 1", l, d)
						}
					}
				}
				for _, home := range []string{"a", "b"} {
					ws, err := m.regions[home].local.Limiter.Status(ctx, subjects(raw, "GB", "192.0.2.1", limit, 1000)[:1])
					if err != nil || ws[0].Used != 1 {
						t.Fatalf("home %s's window: %+v, %v; want the first send only", home, ws, err)
					}
				}
			})
		}
	})

	t.Run("races from the three regions never admit over the limit", func(t *testing.T) {
		// Two homes hold the same window during a move, so two racing sends
		// can each be refused by the other's count in one of them: a race
		// may admit fewer than the limit (asked in turn too: 0-2 of 3 in
		// five rounds), never more, and refunds leave each home's window
		// holding exactly the admitted sends.
		for round := range 5 {
			phone := fmt.Sprintf("+44740012810%d", round)
			var n atomic.Int64
			var wg sync.WaitGroup
			for i := range 30 {
				wg.Go(func() {
					got, err := admitters[meshNames[i%3]].Admit(ctx, admissionOf(t, phone, "GB", fmt.Sprintf("192.0.2.%d", 10+i), limit, 1000))
					if err != nil {
						t.Error(err)
					}
					if admitted(got) {
						n.Add(1)
					}
				})
			}
			wg.Wait()
			t.Logf("round %d: admitted %d of a limit of %d", round, n.Load(), limit)
			if n.Load() > limit {
				t.Fatalf("admitted %d, over the limit of %d", n.Load(), limit)
			}
			for _, home := range []string{"a", "b"} {
				ws, err := m.regions[home].local.Limiter.Status(ctx, subjects(phone, "GB", "192.0.2.1", limit, 1000)[:1])
				if err != nil || ws[0].Used != int(n.Load()) {
					t.Fatalf("home %s's window: %+v, %v; want the %d admitted", home, ws, err, n.Load())
				}
			}
		}
	})
}
