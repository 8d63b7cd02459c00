package admission

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/codestore"
	"smsgw/internal/redisbatch"
	"smsgw/internal/redistopo"
	"smsgw/internal/testenv"
	"smsgw/otp"
	"smsgw/pumping"
	"smsgw/ratelimit"
)

// clusterReplica is one service replica's parts on a shared Cluster.
type clusterReplica struct {
	limiter  *ratelimit.Limiter
	guard    *pumping.Guard
	admitter *ClusterAdmitter
	calls    *countedScripts
}

// countedScripts counts the script calls a replica makes, and the RunAll
// batches they came in.
type countedScripts struct {
	next           *redisbatch.Batcher
	calls, batches atomic.Int64
}

func (c *countedScripts) Run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	c.calls.Add(1)
	return c.next.Run(ctx, script, keys, args...)
}

func (c *countedScripts) RunAll(ctx context.Context, calls []redisbatch.Call) []*redis.Cmd {
	c.calls.Add(int64(len(calls)))
	c.batches.Add(1)
	return c.next.RunAll(ctx, calls)
}

func newClusterReplica(t testing.TB, rdb *redis.ClusterClient, prefix string, edit func(*pumping.Config)) *clusterReplica {
	t.Helper()
	cfg := pumping.DefaultConfig()
	if edit != nil {
		edit(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	scripts := &countedScripts{next: redisbatch.New(rdb, redisbatch.Options{Timeout: testCallTimeout})}
	r := &clusterReplica{calls: scripts}
	r.limiter = ratelimit.New(rdb, prefix, ratelimit.Options{Scripts: scripts})
	r.guard = pumping.New(rdb, prefix, cfg, pumping.Options{Scripts: scripts, Cluster: true})
	r.admitter = NewCluster(scripts, r.limiter, r.guard, codestore.New(rdb, prefix, scripts), codestore.NewIdempotency(rdb, prefix), nil)
	return r
}

// clusterAdmission is a send from ip to raw, counted per phone (max an
// hour) and per address (ipMax an hour): two hash tags, and the pumping
// groups' and the code's.
func clusterAdmission(t testing.TB, ticket, raw, ip string, max, ipMax int) otp.Admission {
	t.Helper()
	p := phone(t, raw)
	return otp.Admission{Ticket: ticket, Phone: p, ClientIP: netip.MustParseAddr(ip), Pumping: true,
		Subjects: []otp.Subject{
			{Scope: "phone", Key: otp.SendPhoneKey + p.E164, Rules: []otp.Rule{{Window: time.Hour, Max: max}}},
			{Scope: "ip", Key: "ip:" + ip, Rules: []otp.Rule{{Window: time.Hour, Max: ipMax}}},
		},
		Code: otp.StoredCode{MAC: []byte("mac-" + ticket), Sealed: []byte("sealed-" + ticket)}, CodeTTL: 5 * time.Minute}
}

// onGet calls seen whenever a GET of key is sent on its own.
func onGet(key string, seen func()) redis.Hook { return getHook{key, seen} }

type getHook struct {
	key  string
	seen func()
}

func (getHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h getHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); len(args) == 2 && cmd.Name() == "get" && args[1] == h.key {
			h.seen()
		}
		return next(ctx, cmd)
	}
}

func (getHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func accepted(out otp.Admitted) bool {
	return out.Claim == otp.Claimed && out.Decision.Allowed && out.Pumping.Refused == nil && out.Issued
}

// TestClusterOneCallPerSlot runs a send's parts on a 3-master Cluster as one
// composed call per slot, all at once; races from two replicas admit
// exactly the limit, and a refused send holds nothing in any window.
func TestClusterOneCallPerSlot(t *testing.T) {
	c := redistopo.StartCluster(t, 3)
	rdb := c.Client()
	prefix := "t:" + testenv.Unique() + ":"
	// Budgets no race here fills, even for a moment: a send a window
	// refuses counts in the pumping budgets until its release, one round
	// trip later (see ClusterAdmitter), and the shipped floors for one
	// address (5 texts) would then refuse some of the window's admissions.
	loose := func(c *pumping.Config) {
		for rule, floor := range c.Floors {
			c.Floors[rule] = 100 * floor
		}
	}
	replicas := []*clusterReplica{newClusterReplica(t, rdb, prefix, loose), newClusterReplica(t, rdb, prefix, loose)}
	ctx := context.Background()
	// Warm up: the scripts load on each shard.
	for i, r := range replicas {
		testenv.WaitUntil(t, 30*time.Second, "a send on the cluster", func() error {
			out, err := r.admitter.Admit(ctx, clusterAdmission(t, fmt.Sprintf("w%d", i), fmt.Sprintf("+44740099999%d", i), "203.0.113.9", 5, 50))
			if err == nil && !accepted(out) {
				err = fmt.Errorf("not accepted: %+v", out)
			}
			return err
		})
	}
	zcard := func(key string) int64 {
		n, err := rdb.ZCard(ctx, prefix+"rl:{"+key+"}").Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	t.Run("the slots are asked at once", func(t *testing.T) {
		r := replicas[0]
		trips := &roundTrips{}
		rdb.AddHook(trips)
		calls, batches := r.calls.calls.Load(), r.calls.batches.Load()
		if out, err := r.admitter.Admit(ctx, clusterAdmission(t, "c1", "+447400200001", "198.51.100.1", 5, 5)); err != nil || !accepted(out) {
			t.Fatalf("%+v, %v", out, err)
		}
		n, b := r.calls.calls.Load()-calls, r.calls.batches.Load()-batches
		if n < 2 || b != 1 {
			t.Fatalf("%d calls in %d batches: want the send's slots (2 or more) in one", n, b)
		}
		// One pipeline, split by shard: one round trip of latency.
		if p, cmds := trips.trips.Load(), trips.commands.Load(); p != 1 || cmds != n {
			t.Fatalf("%d pipelines with %d commands, want 1 with %d", p, cmds, n)
		}
	})

	t.Run("races from two replicas admit exactly the limit", func(t *testing.T) {
		for _, tc := range []struct {
			name       string
			phone, ip  func(i int) string
			max, ipMax int
			key        string
			limit      int
		}{
			{"one phone, many addresses", func(int) string { return "+447400300001" },
				func(i int) string { return fmt.Sprintf("198.51.%d.%d", 101+i/200, i%200+1) }, 3, 50, "send:phone:+447400300001", 3},
			{"one address, many phones", func(i int) string { return fmt.Sprintf("+4474004%05d", i) },
				func(int) string { return "198.51.99.7" }, 5, 4, "ip:198.51.99.7", 4},
		} {
			t.Run(tc.name, func(t *testing.T) {
				const senders = 40
				got := testenv.Race(t, senders, func(i int) string {
					a := clusterAdmission(t, fmt.Sprintf("%s-r%d", tc.key, i), tc.phone(i), tc.ip(i), tc.max, tc.ipMax)
					out, err := replicas[i%2].admitter.Admit(ctx, a)
					switch {
					case err != nil:
						t.Error(err)
						return "error"
					case accepted(out):
						return "admitted"
					case out.Decision.Allowed:
						t.Errorf("refused by the pumping rules: %+v", out.Pumping.Refused)
						return "pumping"
					}
					return "refused"
				})
				if got["admitted"] != tc.limit || got["refused"] != senders-tc.limit {
					t.Fatalf("admitted %d, refused %d; want %d and %d", got["admitted"], got["refused"], tc.limit, senders-tc.limit)
				}
				if n := zcard(tc.key); n != int64(tc.limit) {
					t.Fatalf("the window holds %d tickets, want %d: refused sends gave back what they counted", n, tc.limit)
				}
			})
		}
	})

	t.Run("a refusal on one slot gives back the others", func(t *testing.T) {
		r := replicas[1]
		if out, err := r.admitter.Admit(ctx, clusterAdmission(t, "g1", "+447400500001", "198.51.98.1", 1, 10)); err != nil || !accepted(out) {
			t.Fatalf("%+v, %v", out, err)
		}
		// The phone's window is full: the new address's window must not keep it.
		out, err := r.admitter.Admit(ctx, clusterAdmission(t, "g2", "+447400500001", "198.51.98.2", 1, 10))
		if err != nil || out.Decision.Allowed || out.Decision.Tightest.Scope != "phone" || out.Decision.RetryAfter <= 0 {
			t.Fatalf("%+v, %v; want refused by the phone's window", out.Decision, err)
		}
		if n := zcard("ip:198.51.98.2"); n != 0 {
			t.Fatalf("the address's window holds %d tickets after the refusal, want 0", n)
		}
	})

	t.Run("an idempotency key is claimed with the number's windows, in the same round", func(t *testing.T) {
		const raw = "+447400600001"
		first := clusterAdmission(t, "k1", raw, "198.51.97.1", 5, 10)
		first.Scope, first.ClaimTTL = otp.SendScope(first.Phone.E164, "k-"+prefix), time.Minute
		trips := &roundTrips{}
		rdb.AddHook(trips)
		if out, err := replicas[0].admitter.Admit(ctx, first); err != nil || !accepted(out) {
			t.Fatalf("%+v, %v", out, err)
		}
		// One pipeline, split by shard: the claim rides in it.
		if p := trips.trips.Load(); p != 1 {
			t.Fatalf("a keyed send made %d round trips, want 1", p)
		}
		for i, tc := range []struct {
			name   string
			settle []byte // the first request's answer; nil: still running
			want   otp.Claim
		}{
			{"a duplicate in flight", nil, otp.ClaimBusy},
			{"a replay once answered", []byte(`{"request_id":"r1"}`), otp.ClaimDone},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if tc.settle != nil {
					if err := replicas[0].admitter.idempotency.Settle(ctx, first.Scope, first.Ticket, tc.settle, time.Minute); err != nil {
						t.Fatal(err)
					}
				}
				r := replicas[1]
				ip := fmt.Sprintf("198.51.97.%d", 2+i)
				again := clusterAdmission(t, fmt.Sprintf("k%d", 2+i), raw, ip, 5, 10)
				again.Scope, again.ClaimTTL = first.Scope, time.Minute
				batches := r.calls.batches.Load()
				out, err := r.admitter.Admit(ctx, again)
				if err != nil || out.Claim != tc.want || out.Limited || out.Issued || string(out.Prior) != string(tc.settle) {
					t.Fatalf("%+v, %v; want %v, nothing held", out, err, tc.want)
				}
				if b := r.calls.batches.Load() - batches; b != 1 {
					t.Fatalf("%d rounds of calls, want the claim in the one round", b)
				}
				if n := zcard(otp.SendPhoneKey + raw); n != 1 {
					t.Fatalf("the number's window holds %d tickets, want 1: the claim stopped the duplicate there", n)
				}
				// A replay gives back after its answer.
				testenv.WaitUntil(t, 5*time.Second, "the address's window given back", func() error {
					if n := zcard("ip:" + ip); n != 0 {
						return fmt.Errorf("the duplicate's address window holds %d tickets, want 0", n)
					}
					return nil
				})
			})
		}
	})

	t.Run("racers with one key through two replicas: one admission, one count", func(t *testing.T) {
		const racers = 20
		for _, tc := range []struct {
			name   string
			rounds int
			ip     func(round, i int) string
			ipMax  int
			// exact: the racer holding the claim is admitted. Else its
			// duplicates' counts on the address's slot may refuse it (the
			// price of one round trip, docs/redis.md "What runs in
			// order"): counted and logged, never an admission too many.
			exact bool
		}{
			{"many addresses", 3, func(round, i int) string { return fmt.Sprintf("198.51.%d.%d", 90+round, 1+i) }, 10, true},
			{"one address, 5 a window", 30, func(round, _ int) string { return fmt.Sprintf("198.51.%d.1", 60+round) }, 5, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				refusedClaimer := 0
				for round := range tc.rounds {
					e164 := fmt.Sprintf("+4474006%d%04d", len(tc.name)%10, round)
					scope := otp.SendScope(e164, "race-"+prefix)
					got := testenv.Race(t, racers, func(i int) string {
						a := clusterAdmission(t, fmt.Sprintf("race-%s-%d-%d", tc.name, round, i), e164, tc.ip(round, i), 3, tc.ipMax)
						a.Scope, a.ClaimTTL = scope, time.Minute
						out, err := replicas[i%2].admitter.Admit(ctx, a)
						switch {
						case err != nil:
							t.Error(err)
							return "error"
						case accepted(out):
							return "admitted"
						case out.Claim == otp.ClaimBusy && !out.Limited && !out.Issued:
							return "busy"
						case out.Claim == otp.Claimed && out.Limited && !out.Decision.Allowed:
							return "refused"
						}
						t.Errorf("racer %d: %+v; want admitted, busy or refused", i, out)
						return "other"
					})
					admitted, refused, busy := got["admitted"], got["refused"], got["busy"]
					if admitted+refused != 1 || busy != racers-1 || (tc.exact && admitted != 1) {
						t.Fatalf("round %d: %d admitted, %d refused holding the claim, %d busy; want one holder, admitted, and %d busy",
							round, admitted, refused, busy, racers-1)
					}
					refusedClaimer += refused
					if n := zcard(otp.SendPhoneKey + e164); n != int64(admitted) {
						t.Fatalf("round %d: the number's window holds %d tickets, want %d", round, n, admitted)
					}
					seen := map[string]bool{}
					var ips int64
					for i := range racers {
						if ip := tc.ip(round, i); !seen[ip] {
							seen[ip] = true
							ips += zcard("ip:" + ip)
						}
					}
					if ips != int64(admitted) {
						t.Fatalf("round %d: the racers' address windows hold %d tickets, want %d: the duplicates gave theirs back", round, ips, admitted)
					}
				}
				t.Logf("%d rounds of %d racers: the request holding the claim was refused by its duplicates' counts in %d", tc.rounds, racers, refusedClaimer)
			})
		}
	})

	t.Run("the claim's holder refused by a duplicate's count asks again once it gave back", func(t *testing.T) {
		own := "t:" + testenv.Unique() + ":"
		r := newClusterReplica(t, rdb, own, loose)
		const raw, ip = "+447400620001", "198.51.89.1"
		scope := otp.SendScope(raw, "k")
		sum := sha256.Sum256([]byte(scope))
		// codestore's count of the requests that found the claim held.
		dupKey := own + "idem:{" + otp.SendPhoneKey + raw + "}:" + hex.EncodeToString(sum[:]) + ":dup"
		address := []otp.Subject{{Scope: "ip", Key: "ip:" + ip, Rules: []otp.Rule{{Window: time.Hour, Max: 1}}}}
		for _, tc := range []struct {
			name      string
			duplicate bool // the address's last unit is a duplicate's, counted by the claim
			want      bool // admitted
			rounds    int64
		}{
			{"not a duplicate's: refused, asked again once", false, false, 2},
			{"a duplicate's: asked again once given back", true, true, 2},
		} {
			t.Run(tc.name, func(t *testing.T) {
				other := "other-" + tc.name
				if d, err := r.limiter.Allow(ctx, other, address); err != nil || !d.Allowed {
					t.Fatalf("the address's last unit: %+v, %v", d, err)
				}
				gaveBack := make(chan error, 1)
				if tc.duplicate {
					if err := rdb.Set(ctx, dupKey, 1, time.Minute).Err(); err != nil {
						t.Fatal(err)
					}
					// The duplicate gives back once the holder waits for it.
					asked := make(chan struct{})
					var once sync.Once
					rdb.AddHook(onGet(dupKey, func() { once.Do(func() { close(asked) }) }))
					go func() {
						select {
						case <-asked:
						case <-time.After(10 * time.Second):
						}
						err := r.limiter.Refund(ctx, other, address)
						gaveBack <- errors.Join(err, r.admitter.idempotency.GaveBack(ctx, scope))
					}()
				} else {
					gaveBack <- nil
				}
				a := clusterAdmission(t, "holder-"+tc.name, raw, ip, 5, 1)
				a.Subjects[1] = address[0]
				a.Scope, a.ClaimTTL = scope, time.Minute
				batches := r.calls.batches.Load()
				out, err := r.admitter.Admit(ctx, a)
				if err != nil || accepted(out) != tc.want || out.Claim != otp.Claimed {
					t.Fatalf("%+v, %v; want admitted %v", out, err, tc.want)
				}
				if n := r.calls.batches.Load() - batches; n != tc.rounds {
					t.Fatalf("%d rounds, want %d", n, tc.rounds)
				}
				if err := <-gaveBack; err != nil {
					t.Fatal(err)
				}
				if n, err := rdb.ZCard(ctx, own+"rl:{ip:"+ip+"}").Result(); err != nil || n != 1 {
					t.Fatalf("the address's window holds %d (%v), want 1", n, err)
				}
				if tc.want {
					return
				}
				// Free the address's unit and the claim for the next case.
				if err := errors.Join(r.limiter.Refund(ctx, other, address), r.admitter.idempotency.Settle(ctx, scope, a.Ticket, nil, time.Minute)); err != nil {
					t.Fatal(err)
				}
			})
		}
	})

	t.Run("a keyed send refused from memory asks only the claim, once", func(t *testing.T) {
		own := "t:" + testenv.Unique() + ":"
		r := newClusterReplica(t, rdb, own, loose)
		r.limiter = ratelimit.New(rdb, own, ratelimit.Options{Scripts: r.calls, LocalRefusals: 100})
		r.admitter = NewCluster(r.calls, r.limiter, r.guard, codestore.New(rdb, own, r.calls), codestore.NewIdempotency(rdb, own), nil)
		const ip = "198.51.88.1"
		if out, err := r.admitter.Admit(ctx, clusterAdmission(t, "m1", "+447400630001", ip, 5, 1)); err != nil || !accepted(out) {
			t.Fatalf("first: %+v, %v", out, err)
		}
		// The refusal cache answers while its invalidations are heard.
		rctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = r.limiter.Run(rctx) }()
		t.Cleanup(func() { stop(); <-done })
		i := 0
		testenv.WaitUntil(t, 10*time.Second, "the address's refusal remembered", func() error {
			i++
			batches := r.calls.batches.Load()
			out, err := r.admitter.Admit(ctx, clusterAdmission(t, fmt.Sprintf("m2-%d", i), fmt.Sprintf("+44740063%04d", 100+i), ip, 5, 1))
			switch {
			case err != nil:
				return err
			case out.Decision.Allowed:
				return fmt.Errorf("admitted: %+v", out)
			case r.calls.batches.Load() != batches:
				return fmt.Errorf("refused by Redis, not from memory")
			}
			return nil
		})
		a := clusterAdmission(t, "m3", "+447400630003", ip, 5, 1)
		a.Scope, a.ClaimTTL = otp.SendScope("+447400630003", "k"), time.Minute
		batches := r.calls.batches.Load()
		out, err := r.admitter.Admit(ctx, a)
		if err != nil || out.Claim != otp.Claimed || out.Decision.Allowed {
			t.Fatalf("%+v, %v; want claimed and refused", out, err)
		}
		if n := r.calls.batches.Load() - batches; n != 1 {
			t.Fatalf("%d rounds, want the claim's only", n)
		}
	})

	t.Run("a pumping refusal gives the windows back", func(t *testing.T) {
		own := "t:" + testenv.Unique() + ":"
		r := newClusterReplica(t, rdb, own, nil)
		floor := pumping.DefaultFloors()[pumping.RuleRange100]
		var last otp.Admitted
		for i := 0; i <= floor; i++ {
			a := clusterAdmission(t, fmt.Sprintf("p%d", i), fmt.Sprintf("+4474007000%02d", i), fmt.Sprintf("%d.51.0.1", 10+i), 10, 10)
			var err error
			if last, err = r.admitter.Admit(ctx, a); err != nil {
				t.Fatal(err)
			}
			if refused := last.Pumping.Refused != nil; refused != (i == floor) {
				t.Fatalf("send %d: refused %v, want %v", i, refused, i == floor)
			}
		}
		if last.Pumping.Refused.Rule != pumping.RuleRange100 || !last.Decision.Allowed || last.Issued {
			t.Fatalf("refusal %+v, decision allowed %v, issued %v", last.Pumping.Refused, last.Decision.Allowed, last.Issued)
		}
		for _, key := range []string{fmt.Sprintf("send:phone:+4474007000%02d", floor), fmt.Sprintf("ip:%d.51.0.1", 10+floor)} {
			if n, err := rdb.ZCard(ctx, own+"rl:{"+key+"}").Result(); err != nil || n != 0 {
				t.Fatalf("%s holds %d tickets (%v) after a pumping refusal, want 0", key, n, err)
			}
		}
	})
	t.Run("a window refusal gives back what the pumping groups counted", func(t *testing.T) {
		own := "t:" + testenv.Unique() + ":"
		r := newClusterReplica(t, rdb, own, nil)
		floor := pumping.DefaultFloors()[pumping.RuleRange100]
		send := func(i int, ip string) otp.Admitted {
			t.Helper()
			out, err := r.admitter.Admit(ctx, clusterAdmission(t, fmt.Sprintf("q%d", i), fmt.Sprintf("+4474008000%02d", i), ip, 10, 1))
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		if out := send(0, "192.0.2.1"); !accepted(out) {
			t.Fatalf("first: %+v", out)
		}
		// The address's window is full: each of these is refused there,
		// while its destination group counted the range on another slot.
		for i := 1; i <= 2*floor; i++ {
			if out := send(i, "192.0.2.1"); out.Decision.Allowed || out.Decision.Tightest.Scope != "ip" {
				t.Fatalf("send %d: %+v; want refused by the address's window", i, out.Decision)
			}
		}
		// The range's budget still holds only the first send: fresh
		// addresses fill it to its floor, then it refuses.
		for i := 1; i < floor; i++ {
			if out := send(20+i, fmt.Sprintf("%d.0.2.1", 30+i)); !accepted(out) {
				t.Fatalf("send %d of the range: %+v, %+v; the refused sends kept their counts", i+1, out.Decision, out.Pumping.Refused)
			}
		}
		if out := send(40, "60.0.2.1"); out.Pumping.Refused == nil || out.Pumping.Refused.Rule != pumping.RuleRange100 {
			t.Fatalf("over the range's floor: %+v; want refused by %s", out.Pumping.Refused, pumping.RuleRange100)
		}
	})
}

// BenchmarkClusterSend admits fresh sends (a new number and address each)
// on a 3-master Cluster, asked part by part as the flow did (the windows'
// reserve and commit, the pumping groups, the code) and as one composed
// call per slot, all at once.
//
//	go test -run '^$' -bench ClusterSend -benchtime 3s ./admission
func BenchmarkClusterSend(b *testing.B) {
	c := redistopo.StartCluster(b, 3)
	rdb := c.Client()
	ctx := context.Background()
	for _, mode := range []string{"part by part", "one call per slot"} {
		b.Run(mode, func(b *testing.B) {
			prefix := "b:" + testenv.Unique() + ":"
			r := newClusterReplica(b, rdb, prefix, func(c *pumping.Config) { c.Mode = pumping.ModeShadow })
			codes := codestore.New(rdb, prefix, r.calls)
			var n atomic.Int64
			send := func() error {
				i := n.Add(1)
				a := clusterAdmission(b, fmt.Sprintf("b%d", i), fmt.Sprintf("+4474%08d", i%100_000_000), fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), 5, 5)
				if mode == "one call per slot" {
					out, err := r.admitter.Admit(ctx, a)
					if err == nil && !accepted(out) {
						err = fmt.Errorf("not accepted: %+v", out)
					}
					return err
				}
				if d, err := r.limiter.Allow(ctx, a.Ticket, a.Subjects); err != nil || !d.Allowed {
					return fmt.Errorf("windows: %+v, %v", d, err)
				}
				if res, err := r.guard.Reserve(ctx, a.Phone, a.ClientIP, false); err != nil || res.Refused != nil {
					return fmt.Errorf("pumping: %+v, %v", res.Refused, err)
				}
				_, err := codes.Issue(ctx, a.Phone.E164, a.Code, a.CodeTTL)
				return err
			}
			for range 50 { // scripts loaded on every shard
				if err := send(); err != nil {
					b.Fatal(err)
				}
			}
			before := r.calls.calls.Load()
			b.SetParallelism(12) // 24 callers on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := send(); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sends/s")
			b.ReportMetric(float64(r.calls.calls.Load()-before)/float64(b.N), "calls/send")
		})
	}
}
