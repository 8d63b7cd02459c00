package ratelimit

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/internal/redisbatch"
	"smsgw/internal/testenv"
	"smsgw/otp"
)

// countingScripts counts the decisions that reached Redis.
type countingScripts struct {
	Scripts
	n atomic.Int64
}

func (c *countingScripts) Run(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	c.n.Add(1)
	return c.Scripts.Run(ctx, s, keys, args...)
}

// replica is one service process's limiter with its refusal cache running.
func replica(t *testing.T, rdb redis.UniversalClient, prefix string, cacheSize int) (*Limiter, *countingScripts) {
	t.Helper()
	scripts := &countingScripts{Scripts: redisbatch.New(rdb, redisbatch.Options{})}
	l := New(rdb, prefix, Options{Scripts: scripts, LocalRefusals: cacheSize})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	testenv.WaitFor(t, 5*time.Second, "the refusal cache to subscribe", l.refusals.subscribed.Load)
	return l, scripts
}

// twoReplicas is two replicas on one backend, and what b's scripts count.
func twoReplicas(t *testing.T, be backend) (a, b *Limiter, callsB *countingScripts) {
	t.Helper()
	rdb, prefix := be(t)
	a, _ = replica(t, rdb, prefix, 1000)
	b, callsB = replica(t, rdb, prefix, 1000)
	return a, b, callsB
}

func allow(t *testing.T, l *Limiter, subjects ...otp.Subject) otp.Decision {
	t.Helper()
	d, err := l.Allow(context.Background(), ticket(), subjects)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func testRefusalsAnsweredFromMemory(t *testing.T, be backend) {
	rdb, prefix := be(t)
	l, calls := replica(t, rdb, prefix, 100)
	hot := phone("+14155550100")
	if d := allow(t, l, hot, ip("10.0.0.1")); !d.Allowed {
		t.Fatal("first refused")
	}
	// Scripts per decision: 1 on one primary, one per slot on Cluster.
	unit := calls.n.Load()
	first := allow(t, l, hot, ip("10.0.0.2"))
	if first.Allowed || calls.n.Load() != 2*unit {
		t.Fatalf("second: %+v after %d calls", first, calls.n.Load())
	}
	for i := 0; i < 100; i++ {
		d := allow(t, l, hot, ip(fmt.Sprintf("10.0.1.%d", i)))
		if d.Allowed || d.Tightest.Policy() != "phone-1m" || d.RetryAfter <= 0 || d.RetryAfter > first.RetryAfter || len(d.Policies) != 6 {
			t.Fatalf("cached refusal %d: %+v", i, d)
		}
	}
	if n := calls.n.Load(); n != 2*unit {
		t.Fatalf("%d scripts reached Redis, want %d: refusals come from memory", n, 2*unit)
	}
	// Another subject in the same request is not refused because of the cache.
	if d := allow(t, l, phone("+14155550101"), ip("10.0.0.1")); !d.Allowed {
		t.Fatalf("an unrelated phone was refused: %+v", d)
	}
}

func testRefusalCacheStaysUnusedUntilSubscribed(t *testing.T, be backend) {
	rdb, prefix := be(t)
	scripts := &countingScripts{Scripts: redisbatch.New(rdb, redisbatch.Options{})}
	l := New(rdb, prefix, Options{Scripts: scripts, LocalRefusals: 100}) // Run never started
	hot := phone("+14155550100")
	for i := 0; i < 5; i++ {
		allow(t, l, hot)
	}
	if n := scripts.n.Load(); n != 5 { // one subject: one script, on Cluster too
		t.Fatalf("%d of 5 decisions reached Redis: an unsubscribed cache must not answer", n)
	}
}

func TestRefusalCacheIsBounded(t *testing.T) {
	for _, max := range []int{1, 2, 16, 100, 1000} {
		t.Run(fmt.Sprint(max), func(t *testing.T) {
			r := newRefusals(max)
			r.subscribed.Store(true)
			until := refusal{until: time.Now().Add(time.Hour)}
			for i := range 10 * max {
				k := fmt.Sprint("k", i)
				r.remember(k, until)
				if i%3 == 0 {
					r.forget([]string{k})
					r.remember(k, until)
				}
				if _, ok := r.lookup([]string{k}, time.Now()); !ok {
					t.Fatalf("%s not held right after remember", k)
				}
			}
			if n := r.len(); n != max {
				t.Fatalf("cache holds %d entries, bound %d", n, max)
			}
		})
	}
}

// TestRefusalCacheEvictsTheLeastRecentlyUsed: a full cache forgets the
// entry neither looked up nor remembered for longest, so a subject under a
// flood stays while an attacker's fresh subjects push each other out.
func TestRefusalCacheEvictsTheLeastRecentlyUsed(t *testing.T) {
	r := newRefusals(3)
	r.subscribed.Store(true)
	until := refusal{until: time.Now().Add(time.Hour)}
	for _, k := range []string{"a", "b", "c"} {
		r.remember(k, until)
	}
	held := func(k string) bool {
		_, ok := r.lookup([]string{k}, time.Now())
		return ok
	}
	if !held("a") { // a is now the most recently used
		t.Fatal("a not held")
	}
	r.remember("d", until)
	if held("b") {
		t.Fatal("b, the least recently used, was kept")
	}
	for i := range 100 { // an attacker's fresh subjects, the flood on a between them
		r.remember(fmt.Sprint("x", i), until)
		if !held("a") {
			t.Fatalf("the flooded subject was dropped after %d fresh ones", i+1)
		}
	}
}

// TestReplicasRaceAndResetTogether: two replicas with refusal caches race for
// one phone (exactly one admission), refuse from memory, and both admit again
// as soon as the support desk resets the phone on one of them.
func testReplicasRaceAndResetTogether(t *testing.T, be backend) {
	a, b, callsB := twoReplicas(t, be)
	hot := phone("+14155550100")
	var admitted atomic.Int64
	testenv.Race(t, 200, func(i int) string {
		l := a
		if i%2 == 1 {
			l = b
		}
		for j := range 5 {
			d, err := l.Allow(context.Background(), ticket(), []otp.Subject{hot, ip(fmt.Sprintf("10.3.%d.%d", i, j))})
			if outcome(t, d, err) == "error" {
				break
			}
			if d.Allowed {
				admitted.Add(1)
			}
		}
		return ""
	})
	if n := admitted.Load(); n != 1 {
		t.Fatalf("admitted %d of 1000 across two replicas, want exactly 1", n)
	}
	if b.refusals.len() == 0 {
		t.Fatal("replica b cached no refusal")
	}

	if err := a.Reset(context.Background(), []otp.Subject{hot}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 2*time.Second, "replica b to forget its refusal after a reset on a", func() bool {
		_, cached := b.refusals.lookup([]string{b.key(hot)}, time.Now())
		return !cached
	})
	before := callsB.n.Load()
	if d := allow(t, b, hot, ip("10.9.9.9")); !d.Allowed {
		t.Fatalf("after the reset replica b refused: %+v", d)
	}
	if callsB.n.Load() == before {
		t.Fatal("the admission after a reset must come from Redis")
	}
}

func testRefundReachesTheOtherReplica(t *testing.T, be backend) {
	a, b, _ := twoReplicas(t, be)
	hot := phone("+14155550100")
	tk := ticket()
	if d, err := a.Allow(context.Background(), tk, []otp.Subject{hot}); err != nil || !d.Allowed {
		t.Fatal(err)
	}
	if d := allow(t, b, hot); d.Allowed {
		t.Fatal("second admitted")
	}
	// The provider refused the text: a gives the quota back.
	if err := a.Refund(context.Background(), tk, []otp.Subject{hot}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 2*time.Second, "replica b to see the refund", func() bool { return allow(t, b, hot).Allowed })
}
