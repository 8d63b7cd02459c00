package region

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/admission"
	"smsgw/codestore"
	"smsgw/internal/redistopo"
	"smsgw/internal/testenv"
	"smsgw/otp"
	"smsgw/pumping"
)

// admitterOf is a region's SendAdmitter as the composition root builds it:
// a pumping guard on its own Redis that runs the destination's scripts at
// home, and a composed script for each other region.
func admitterOf(t *testing.T, d *Deployment) otp.SendAdmitter {
	t.Helper()
	return admitterWith(t, d, pumping.ModeShadow) // counted, never refused: the sends share a network
}

// admitterWith is admitterOf with the pumping rules in mode.
func admitterWith(t *testing.T, d *Deployment, mode string) otp.SendAdmitter {
	t.Helper()
	return admitterConfig(t, d, func(c *pumping.Config) { c.Mode = mode })
}

// admitterConfig is admitterOf with the pumping configuration edit leaves.
func admitterConfig(t *testing.T, d *Deployment, edit func(*pumping.Config)) otp.SendAdmitter {
	t.Helper()
	cfg := pumping.DefaultConfig()
	edit(&cfg)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	_, onCluster := d.local.Redis.(*redis.ClusterClient)
	guard := pumping.New(d.local.Redis, prefix, cfg, pumping.Options{Scripts: d.local.Scripts, Cluster: onCluster,
		Home: func(country string) pumping.Scripts { return d.HomeScripts(country) }})
	composed := func(s *Store) interface {
		otp.SendAdmitter
		HomeAdmitter
	} {
		if _, ok := s.Redis.(*redis.ClusterClient); ok {
			return admission.NewCluster(s.Scripts, s.Limiter, guard, s.Codes.(*codestore.Store), s.Idempotency.(*codestore.Idempotency), nil)
		}
		return admission.New(s.Scripts, s.Limiter, guard, s.Codes.(*codestore.Store), s.Idempotency.(*codestore.Idempotency))
	}
	homes := map[string]HomeAdmitter{}
	for name, s := range d.regions {
		if s != d.local {
			homes[name] = composed(s)
		}
	}
	fallback := composed(&Store{Name: d.local.Name, Redis: d.local.Redis, Scripts: d.local.Scripts, Limiter: d.local.Limiter,
		Codes: d.o.FallbackCodes, Idempotency: d.o.FallbackIdempotency})
	return d.Admitter(guard, composed(d.local), homes, fallback)
}

// admissionOf is a send to a number from ip, its number's window of
// phoneMax sends an hour, its address's of ipMax.
func admissionOf(t *testing.T, raw, country, ip string, phoneMax, ipMax int) otp.Admission {
	t.Helper()
	p, err := otp.ParsePhone(raw, "")
	if err != nil {
		t.Fatal(err)
	}
	tk := ticket()
	return otp.Admission{Ticket: tk, Phone: p, ClientIP: netip.MustParseAddr(ip), Pumping: true,
		Subjects: subjects(p.E164, country, ip, phoneMax, ipMax),
		Code:     otp.StoredCode{MAC: []byte("mac-" + tk), Sealed: []byte("sealed-" + tk)}, CodeTTL: 5 * time.Minute}
}

// checkKeyedAnswer fails the test unless a keyed send got the claim it
// wants (and the stored answer settle), admitted when it claimed and
// holding nothing when it did not.
func checkKeyedAnswer(t *testing.T, got otp.Admitted, err error, want otp.Claim, settle []byte) {
	t.Helper()
	if err != nil || got.Claim != want || string(got.Prior) != string(settle) {
		t.Fatalf("Admit: %+v, %v; want %v", got, err, want)
	}
	if want == otp.Claimed && !admitted(got) {
		t.Fatalf("Admit: %+v; want admitted", got)
	}
	if want != otp.Claimed && (got.Limited || got.Issued) {
		t.Fatalf("Admit: %+v; want nothing held", got)
	}
}

func admitted(a otp.Admitted) bool {
	return a.Claim == otp.Claimed && a.Limited && a.Decision.Allowed && a.Pumping.Refused == nil && a.Issued
}

// raceFromBoth races 30 sends, every other one from b, the others from a
// (adm builds send i), and counts the sends admitted.
func raceFromBoth(t *testing.T, a, b otp.SendAdmitter, adm func(i int) otp.Admission) int {
	t.Helper()
	var n atomic.Int64
	var wg sync.WaitGroup
	for i := range 30 {
		from := a
		if i%2 == 1 {
			from = b
		}
		wg.Go(func() {
			got, err := from.Admit(context.Background(), adm(i))
			if err != nil {
				t.Error(err)
			}
			if admitted(got) {
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return int(n.Load())
}

func TestAdmitterCrossesOnceToARemoteHome(t *testing.T) {
	p := newPair(t, 0)
	a, b := admitterOf(t, p.a), admitterOf(t, p.b)
	ctx := context.Background()
	// The first call to b loads the composed script there.
	if _, err := a.Admit(ctx, admissionOf(t, "+14155550109", "US", "192.0.2.9", 3, 1000)); err != nil {
		t.Fatal(err)
	}

	t.Run("one request to the home, the code issued there", func(t *testing.T) {
		before := p.aToB.Requests()
		got, err := a.Admit(ctx, admissionOf(t, "+14155550101", "US", "192.0.2.1", 3, 1000))
		if err != nil || !admitted(got) {
			t.Fatalf("Admit: %+v, %v; want admitted", got, err)
		}
		if n := p.aToB.Requests() - before; n != 1 {
			t.Fatalf("the send made %d requests to its home region, want 1", n)
		}
		if _, ok, err := p.b.local.Codes.Pending(ctx, "+14155550101"); err != nil || !ok {
			t.Fatalf("no code pending in the home region (%v)", err)
		}
	})

	t.Run("a local refusal never crosses", func(t *testing.T) {
		if got, err := a.Admit(ctx, admissionOf(t, "+14155550102", "US", "192.0.2.2", 3, 1)); err != nil || !admitted(got) {
			t.Fatalf("first send: %+v, %v", got, err)
		}
		before := p.aToB.Requests()
		got, err := a.Admit(ctx, admissionOf(t, "+14155550103", "US", "192.0.2.2", 3, 1))
		if err != nil || !got.Limited || got.Decision.Allowed {
			t.Fatalf("over the address's window: %+v, %v; want refused", got, err)
		}
		if n := p.aToB.Requests() - before; n != 0 {
			t.Fatalf("a local refusal made %d requests to the home region", n)
		}
	})

	t.Run("races from both regions admit exactly the limit", func(t *testing.T) {
		const limit = 3
		n := raceFromBoth(t, a, b, func(int) otp.Admission {
			return admissionOf(t, "+14155550104", "US", "192.0.2.4", limit, 1000)
		})
		if n != limit {
			t.Fatalf("admitted %d, want exactly %d", n, limit)
		}
	})

	t.Run("a local home is not asked across", func(t *testing.T) {
		before := p.aToB.Requests()
		if got, err := a.Admit(ctx, admissionOf(t, "+447400123401", "GB", "192.0.2.5", 3, 1000)); err != nil || !admitted(got) {
			t.Fatalf("Admit: %+v, %v", got, err)
		}
		if n := p.aToB.Requests() - before; n != 0 {
			t.Fatalf("a local home made %d requests to another region", n)
		}
	})
}

// A home out of reach: without a fallback the send fails closed, holding
// nothing; with one, the home's composed call runs here over the fallback
// ledger (at most F a window) and the fallback stores, and the admission
// is carried home once the link heals.
func TestAdmitterFallsBackHereWhenTheHomeIsCut(t *testing.T) {
	ctx := context.Background()
	t.Run("without a fallback", func(t *testing.T) {
		p := newPair(t, 0)
		a := admitterOf(t, p.a)
		p.aToB.Cut()
		adm := admissionOf(t, "+14155550201", "US", "192.0.2.21", 3, 1)
		if _, err := a.Admit(ctx, adm); err == nil || !Unreachable(err) {
			t.Fatalf("Admit with the home cut: %v, want an unreachable error (503)", err)
		}
		// The address's reservation was released: the window still has room.
		ws, err := p.a.local.Limiter.Status(ctx, adm.Subjects[1:])
		if err != nil || ws[0].Used != 0 {
			t.Fatalf("the address's window after the cut: %+v, %v; want nothing used", ws, err)
		}
	})
	t.Run("with a fallback of one", func(t *testing.T) {
		p := newPair(t, 1)
		a := admitterOf(t, p.a)
		p.aToB.Cut()
		const phone = "+14155550202"
		adm := admissionOf(t, phone, "US", "192.0.2.22", 3, 1000)
		if got, err := a.Admit(ctx, adm); err != nil || !admitted(got) {
			t.Fatalf("Admit with the home cut: %+v, %v; want admitted from the ledger", got, err)
		}
		if p.a.Fallbacks() != 1 {
			t.Fatalf("%d fallback admissions, want 1", p.a.Fallbacks())
		}
		if _, ok, err := p.a.Codes().Pending(ctx, phone); err != nil || !ok {
			t.Fatalf("no code pending here under fallback (%v)", err)
		}
		if got, err := a.Admit(ctx, admissionOf(t, phone, "US", "192.0.2.22", 3, 1000)); err != nil || !got.Limited || got.Decision.Allowed {
			t.Fatalf("a second send past F: %+v, %v; want refused", got, err)
		}
		ws, err := p.a.local.Limiter.Status(ctx, adm.Subjects[1:])
		if err != nil || ws[0].Used != 1 {
			t.Fatalf("the address's window: %+v, %v; want the admitted send only", ws, err)
		}
		p.aToB.Heal()
		testenv.WaitFor(t, 30*time.Second, "the carry home", func() bool {
			n, err := p.a.carryOnce(ctx, &p.a.o.Remote[0])
			return err == nil && n == 1
		})
		ws, err = p.b.local.Limiter.Status(ctx, adm.Subjects[:1])
		if err != nil || ws[0].Used != 1 {
			t.Fatalf("the home's window after the carry: %+v, %v; want 1", ws, err)
		}
	})
}

// A pumping refusal, here or at home, holds nothing: the address's window
// and the number's count only the admitted sends.
func TestAdmitterPumpingRefusalHoldsNothing(t *testing.T) {
	p := newPair(t, 0)
	a := admitterWith(t, p.a, pumping.ModeEnforce)
	ctx := context.Background()
	ip := "198.51.100.7"
	sent := 0
	for i := range 50 {
		adm := admissionOf(t, fmt.Sprintf("+1415555%04d", 3000+i), "US", ip, 3, 1000)
		got, err := a.Admit(ctx, adm)
		if err != nil {
			t.Fatal(err)
		}
		if admitted(got) {
			sent++
			continue
		}
		if got.Pumping.Refused == nil {
			t.Fatalf("send %d: %+v, want admitted or a pumping refusal", i, got)
		}
		t.Logf("refused after %d sends: %s", sent, got.Pumping.Refused.Reason())
		ws, err := p.a.local.Limiter.Status(ctx, adm.Subjects[1:])
		if err != nil || ws[0].Used != sent {
			t.Fatalf("the address's window: %+v, %v; want %d used", ws, err, sent)
		}
		ws, err = p.b.local.Limiter.Status(ctx, adm.Subjects[:1])
		if err != nil || ws[0].Used != 0 {
			t.Fatalf("the refused number's window at home: %+v, %v; want nothing used", ws, err)
		}
		return
	}
	t.Fatalf("%d sends from one address to fresh numbers were never refused", sent)
}

// A number homed on another region's Redis Cluster costs one cross-region
// round trip: the home's slots are asked at once, one composed script each.
// Races from both regions admit exactly the limit.
func TestAdmitterCrossesOnceToAClusterHome(t *testing.T) {
	ctx := context.Background()
	const oneWay = 100 * time.Millisecond
	cluster := redistopo.StartCluster(t, 3)
	link := redistopo.NewClusterLink(t, cluster, oneWay)
	clusterClient := func(addrs []string) redis.UniversalClient {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 3 * time.Second})
	}
	ra := redistopo.StartSingle(t)
	aToA := testenv.NewDelayProxy(t, ra.Addr, oneWay)
	homes := NewHomes(1, "a", map[string]string{"FR": "c"}, nil)
	da := deploy(homes, 0, store(t, "a", ra.Addr), storeOn(t, "c", clusterClient(link.Addrs())))
	a := admitterOf(t, da)
	c := admitterOf(t, deploy(homes, 0, storeOn(t, "c", clusterClient(cluster.Addrs())), store(t, "a", aToA.Addr())))
	// The first sends learn the slots and load the script on every shard.
	for i, from := range []otp.SendAdmitter{a, c} {
		testenv.WaitUntil(t, 30*time.Second, "a first send", func() error {
			got, err := from.Admit(ctx, admissionOf(t, fmt.Sprintf("+3361234%04d", 9990+i), "FR", "192.0.2.99", 3, 1000))
			if err == nil && !admitted(got) {
				err = fmt.Errorf("not admitted: %+v", got)
			}
			return err
		})
	}
	// The shards the composed calls touch, warmed: a first call to a shard
	// loads the script there (NOSCRIPT, then the script), and a new
	// connection's handshake is a round trip of its own: sends at once
	// open the few a send's parallel calls use.
	for round := range 3 {
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				if _, err := a.Admit(ctx, admissionOf(t, fmt.Sprintf("+3361235%d%03d", round, i), "FR", fmt.Sprintf("192.0.2.%d", 100+i), 3, 1000)); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}

	t.Run("one round trip to the home", func(t *testing.T) {
		var took []time.Duration
		for i := range 5 {
			raw := fmt.Sprintf("+3361236%04d", i)
			before := link.Requests()
			start := time.Now()
			got, err := a.Admit(ctx, admissionOf(t, raw, "FR", fmt.Sprintf("192.0.2.%d", 120+i), 3, 1000))
			took = append(took, time.Since(start))
			if err != nil || !admitted(got) {
				t.Fatalf("Admit: %+v, %v; want admitted", got, err)
			}
			if n := link.Requests() - before; n < 1 || n > 3 {
				t.Fatalf("the send made %d requests to its home's shards, want 1 to 3 (one per shard at most)", n)
			}
			if n, err := cluster.Client().Exists(ctx, prefix+"otp:"+raw).Result(); err != nil || n != 1 {
				t.Fatalf("no code pending in the home region (%d, %v)", n, err)
			}
		}
		slices.Sort(took)
		// One round trip is 2*oneWay; part by part it was three.
		if m := took[len(took)/2]; m < 2*oneWay || m >= 4*oneWay {
			t.Fatalf("median send %s; want one round trip (%s) and under two", m, 2*oneWay)
		}
		t.Logf("sends to a Cluster home: %v (a round trip is %s)", took, 2*oneWay)
	})

	t.Run("with an Idempotency-Key: one round trip, a duplicate counts nothing, a replay answers", func(t *testing.T) {
		const raw = "+33612380001"
		keyed := func(ip string) otp.Admission {
			adm := admissionOf(t, raw, "FR", ip, 3, 1000)
			adm.Scope, adm.ClaimTTL = otp.SendScope(raw, "signup-1"), time.Minute
			return adm
		}
		windowHolds := func() int64 {
			t.Helper()
			n, err := cluster.Client().ZCard(ctx, prefix+"rl:{"+otp.SendPhoneKey+raw+"}").Result()
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		first := keyed("192.0.2.160")
		for _, tc := range []struct {
			name   string
			from   otp.SendAdmitter
			afar   bool // from a, across the delaying link
			adm    otp.Admission
			settle []byte // the first send's answer, stored before
			want   otp.Claim
		}{
			{"the first", a, true, first, nil, otp.Claimed},
			{"a duplicate in flight, from the home's region", c, false, keyed("192.0.2.161"), nil, otp.ClaimBusy},
			{"a duplicate in flight, from afar", a, true, keyed("192.0.2.162"), nil, otp.ClaimBusy},
			{"a replay once answered", a, true, keyed("192.0.2.163"), []byte(`{"request_id":"r1"}`), otp.ClaimDone},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if tc.settle != nil {
					if err := da.Idempotency().Settle(ctx, first.Scope, first.Ticket, tc.settle, time.Minute); err != nil {
						t.Fatal(err)
					}
				}
				before := link.Requests()
				start := time.Now()
				got, err := tc.from.Admit(ctx, tc.adm)
				took := time.Since(start)
				checkKeyedAnswer(t, got, err, tc.want, tc.settle)
				if h := windowHolds(); h != 1 {
					t.Fatalf("the number's window at home holds %d, want the first send only", h)
				}
				if !tc.afar {
					return
				}
				// One to three requests (one per shard) answer the send; a
				// duplicate in flight then gives back what it counted on
				// the other slots before it waits (a round trip more), a
				// replay after its answer.
				if n := link.Requests() - before; n < 1 || (tc.want == otp.Claimed && n > 3) {
					t.Fatalf("the send made %d requests to its home's shards, want 1 to 3", n)
				}
				trips := time.Duration(1)
				if tc.want == otp.ClaimBusy {
					trips = 2
				}
				if took >= (trips+1)*2*oneWay {
					t.Fatalf("the send took %s, want %d round trip(s) of %s", took, trips, 2*oneWay)
				}
				t.Logf("%s: %s, %d requests (a round trip is %s)", tc.name, took, link.Requests()-before, 2*oneWay)
			})
		}
	})

	t.Run("racers with one key from both regions: one admission", func(t *testing.T) {
		const raw = "+33612390001"
		scope := otp.SendScope(raw, "race")
		outcomes := testenv.Race(t, 20, func(i int) string {
			from := a
			if i%2 == 1 {
				from = c
			}
			adm := admissionOf(t, raw, "FR", fmt.Sprintf("192.0.2.%d", 170+i), 3, 1000)
			adm.Scope, adm.ClaimTTL = scope, time.Minute
			got, err := from.Admit(ctx, adm)
			switch {
			case err != nil:
				t.Error(err)
				return "error"
			case admitted(got):
				return "admitted"
			case got.Claim == otp.ClaimBusy && !got.Limited && !got.Issued:
				return "busy"
			}
			t.Errorf("racer %d: %+v; want admitted or busy", i, got)
			return "other"
		})
		if outcomes["admitted"] != 1 || outcomes["busy"] != 19 {
			t.Fatalf("%d admitted, %d busy; want 1 and 19", outcomes["admitted"], outcomes["busy"])
		}
		if h, err := cluster.Client().ZCard(ctx, prefix+"rl:{"+otp.SendPhoneKey+raw+"}").Result(); err != nil || h != 1 {
			t.Fatalf("the number's window at home holds %d (%v), want 1", h, err)
		}
	})

	t.Run("from the Cluster, with a spend ceiling, to a home on one primary", func(t *testing.T) {
		spending := admitterConfig(t, deploy(homes, 0, storeOn(t, "c", clusterClient(cluster.Addrs())), store(t, "a", aToA.Addr())),
			func(c *pumping.Config) { c.Mode, c.Spend = pumping.ModeShadow, pumping.Spend{Default: 0.05, Day: 1000} })
		// A new Cluster client: its first call learns the slots and loads
		// the scripts, which a loaded -race run can take past the batch
		// timeout; what is checked is that the call admits at all.
		testenv.WaitUntil(t, 30*time.Second, "admitted in one composed call", func() error {
			got, err := spending.Admit(ctx, admissionOf(t, "+447400123499", "GB", "192.0.2.140", 3, 1000))
			if err == nil && !admitted(got) {
				err = fmt.Errorf("not admitted: %+v", got)
			}
			return err
		})
	})

	t.Run("races from both regions admit exactly the limit", func(t *testing.T) {
		const limit = 3
		n := raceFromBoth(t, a, c, func(i int) otp.Admission {
			return admissionOf(t, "+33612370001", "FR", fmt.Sprintf("192.0.2.%d", 150+i), limit, 1000)
		})
		if n != limit {
			t.Fatalf("admitted %d, want exactly %d", n, limit)
		}
		n2, err := cluster.Client().ZCard(ctx, prefix+"rl:{send:phone:+33612370001}").Result()
		if err != nil || n2 != limit {
			t.Fatalf("the number's window at home holds %d (%v), want %d", n2, err, limit)
		}
	})
}

// With no network rule that is a sign (pumping.floors without them), the
// caller has no signal to tell the home: the send still crosses once.
func TestAdmitterCrossesOnceWithoutNetworkSigns(t *testing.T) {
	p := newPair(t, 0)
	noSigns := func(c *pumping.Config) {
		c.Mode = pumping.ModeShadow
		for _, r := range []string{pumping.RuleNet16, pumping.RuleNet24, pumping.RuleNet48, pumping.RuleNet6x32} {
			delete(c.Floors, r)
		}
	}
	a := admitterConfig(t, p.a, noSigns)
	admitterConfig(t, p.b, noSigns)
	ctx := context.Background()
	// The first call to b loads the composed script there.
	if _, err := a.Admit(ctx, admissionOf(t, "+14155550119", "US", "192.0.2.19", 3, 1000)); err != nil {
		t.Fatal(err)
	}
	before := p.aToB.Requests()
	got, err := a.Admit(ctx, admissionOf(t, "+14155550111", "US", "192.0.2.11", 3, 1000))
	if err != nil || !admitted(got) {
		t.Fatalf("Admit: %+v, %v; want admitted", got, err)
	}
	if n := p.aToB.Requests() - before; n != 1 {
		t.Fatalf("the send made %d requests to its home region, want 1", n)
	}
}
