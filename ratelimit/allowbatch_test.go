package ratelimit

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/internal/redisbatch"
	"smsgw/internal/redistopo"
	"smsgw/internal/testenv"
	"smsgw/otp"
)

// batchedLimiter is a Limiter on a Redis of the test's own, whose batcher
// sends one pipeline at a time, so that RunAll's calls leave together and
// allow.lua's calls among them are merged into allowbatch.lua's.
func batchedLimiter(t *testing.T) (*Limiter, *redisbatch.Batcher, *redis.Client) {
	t.Helper()
	node := redistopo.StartSingle(t)
	rdb := node.Client()
	t.Cleanup(func() { rdb.Close() })
	b := redisbatch.New(rdb, redisbatch.Options{Pipelines: 1, Timeout: 10 * time.Second})
	return New(rdb, "t:", Options{Scripts: b}), b, rdb
}

// decideAll decides each list of subjects with its own ticket, all in one
// pipeline, as Allow would.
func decideAll(t *testing.T, l *Limiter, b *redisbatch.Batcher, decisions [][]otp.Subject) []otp.Decision {
	t.Helper()
	calls := make([]redisbatch.Call, len(decisions))
	for i, subjects := range decisions {
		calls[i] = redisbatch.Call{Script: allowScript, Keys: l.allowKeys(subjects, false), Args: l.allowArgs(ticket(), 0, subjects).argv()}
	}
	out := make([]otp.Decision, len(decisions))
	for i, cmd := range b.RunAll(context.Background(), calls) {
		if err := cmd.Err(); err != nil {
			t.Fatalf("decision %d of %d: %v", i, len(decisions), err)
		}
		r, err := l.readAllow(cmd.Val(), decisions[i])
		if err != nil {
			t.Fatal(err)
		}
		out[i] = r.decision()
	}
	return out
}

func evalshaCalls(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	for k, v := range infoFields(t, rdb, "commandstats") {
		if k == "cmdstat_evalsha" {
			_, rest, _ := strings.Cut(v, "calls=")
			calls, _, _ := strings.Cut(rest, ",")
			n, _ := strconv.Atoi(calls)
			return n
		}
	}
	return 0
}

// resultOf is the model's view of a decision.
func resultOf(d otp.Decision) modelResult {
	got := modelResult{allowed: d.Allowed, retry: d.RetryAfter.Microseconds(), used: d.Tightest.Used, reset: d.Tightest.Reset.Microseconds()}
	for k, p := range d.Policies {
		if p.Scope == d.Tightest.Scope && p.Rule == d.Tightest.Rule {
			got.tight = k
			break
		}
	}
	return got
}

// TestBatchedCallsMatchReferenceModel is TestMatchesReferenceModel for
// allowbatch.lua: every step decides one to six requests of the same shape
// at one instant in one merged call, and each must get the model's answer
// for it after those before it.
func TestBatchedCallsMatchReferenceModel(t *testing.T) {
	l, b, rdb := batchedLimiter(t)
	clock := testenv.NewClock(t0)
	l.now = clock.Now
	rng := rand.New(rand.NewPCG(2, uint64(time.Now().UnixNano())))
	pool := modelSubjects()
	m := &model{entries: map[string][]int64{}}
	now := t0.UnixMicro()
	before := evalshaCalls(t, rdb)
	const steps = 600
	admitted, decided := 0, 0
	for i := range steps {
		switch rng.IntN(4) {
		case 0:
		case 1:
			now += int64(rng.IntN(1000)) * 1000
		case 2:
			now += int64(rng.IntN(3)+1) * 1_000_000
		case 3:
			now += int64(rng.IntN(400))
		}
		one := rng.IntN(5) == 0 // every decision of the step on its phone alone
		decisions := make([][]otp.Subject, 1+rng.IntN(6))
		for k := range decisions {
			decisions[k] = []otp.Subject{pool[rng.IntN(3)], pool[3+rng.IntN(2)]}
			if one {
				decisions[k] = decisions[k][:1]
			}
		}
		clock.Set(time.UnixMicro(now))
		for k, d := range decideAll(t, l, b, decisions) {
			want := m.allow(now, decisions[k])
			if got := resultOf(d); got != want {
				t.Fatalf("step %d, decision %d of %d, at %d with %v: limiter %+v, model %+v", i, k+1, len(decisions), now, decisions[k], got, want)
			}
			if d.Allowed {
				admitted++
			}
			decided++
		}
	}
	if admitted < decided/10 || admitted > decided*9/10 {
		t.Fatalf("admitted %d of %d: the traffic did not exercise both answers", admitted, decided)
	}
	// One EVALSHA a step, and one more for each script's first call (NOSCRIPT).
	if n := evalshaCalls(t, rdb) - before; n > steps+2 {
		t.Fatalf("%d EVALSHA for %d steps of %d decisions: the calls were not merged", n, steps, decided)
	}
}

// Decisions merged into one call with Redis's clock share one TIME: they
// are decided in turn at one instant, each seeing those before it.
func TestBatchedDecisionsShareRedisTime(t *testing.T) {
	l, b, _ := batchedLimiter(t)
	p, x := phone("+14155550100"), ip("203.0.113.7")
	ds := decideAll(t, l, b, [][]otp.Subject{{p, x}, {p, x}, {phone("+14155550101"), x}})
	if !ds[0].Allowed || ds[1].Allowed || !ds[2].Allowed {
		t.Fatalf("admitted %v, %v, %v; want the second refused by the first", ds[0].Allowed, ds[1].Allowed, ds[2].Allowed)
	}
	if ds[1].RetryAfter != time.Minute {
		t.Errorf("the second waits %v, want exactly the phone's minute: the first was recorded at the same instant", ds[1].RetryAfter)
	}
	if ds[2].Tightest.Policy() != "phone-1m" || ds[2].Tightest.Used != 1 {
		t.Errorf("the third's tightest = %s used %d, want phone-1m used 1", ds[2].Tightest.Policy(), ds[2].Tightest.Used)
	}
	if !ds[0].Now.Equal(ds[1].Now) || !ds[1].Now.Equal(ds[2].Now) || time.Since(ds[0].Now).Abs() > time.Minute {
		t.Errorf("now = %v, %v, %v: want one Redis TIME", ds[0].Now, ds[1].Now, ds[2].Now)
	}
}
