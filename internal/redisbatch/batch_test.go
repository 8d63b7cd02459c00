package redisbatch_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/internal/redisbatch"
	"smsgw/internal/redistopo"
	"smsgw/internal/testenv"
	"smsgw/otp"
	"smsgw/ratelimit"
)

// incr counts calls: each call's answer is how many ran before it, plus one.
var incr = redis.NewScript(`return redis.call('INCR', KEYS[1])`)

func TestRacingCallsEachGetTheirOwnAnswer(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	b := redisbatch.New(rdb, redisbatch.Options{Timeout: 10 * time.Second})
	const n = 500
	answers := testenv.Race(t, n, func(int) string {
		v, err := b.Run(context.Background(), incr, []string{prefix + "n"}).Int64()
		if err != nil {
			t.Error(err)
			return "error"
		}
		return fmt.Sprint(v)
	})
	for v := 1; v <= n; v++ {
		if times := answers[fmt.Sprint(v)]; times != 1 {
			t.Errorf("answer %d given %d times", v, times)
		}
	}
}

func TestScriptsAreLoadedAgainAfterAFlush(t *testing.T) {
	node := redistopo.StartSingle(t)
	rdb := node.Client()
	defer rdb.Close()
	b := redisbatch.New(rdb, redisbatch.Options{Timeout: 10 * time.Second})
	ctx := context.Background()
	for i := range 3 {
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		testenv.Race(t, 20, func(int) string {
			if err := b.Run(ctx, incr, []string{"n"}).Err(); err != nil {
				t.Errorf("round %d: %v", i, err)
			}
			return ""
		})
	}
	if got, _ := rdb.Get(ctx, "n").Int(); got != 60 {
		t.Fatalf("counter is %d after 60 calls, want 60", got)
	}
}

// A frozen Redis (SIGSTOP) holds both pipelines; every call made meanwhile
// must fail at its own deadline, not after the pipelines ahead of it, and a
// call given up before it was sent must never run.
func TestFrozenRedisFailsEachCallAtItsOwnDeadline(t *testing.T) {
	node := redistopo.StartSingle(t)
	rdb := node.Client()
	defer rdb.Close()
	const timeout = 500 * time.Millisecond
	fast := redis.NewClient(&redis.Options{Addr: node.Addr, ReadTimeout: timeout, WriteTimeout: timeout,
		ContextTimeoutEnabled: true, MaxRetries: -1})
	defer fast.Close()
	b := redisbatch.New(fast, redisbatch.Options{Pipelines: 2, Timeout: timeout})
	ctx := context.Background()
	if err := b.Run(ctx, incr, []string{"warm"}).Err(); err != nil {
		t.Fatal(err)
	}
	node.Pause()
	defer node.Resume()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var worst time.Duration
	// Waves keep the pipeline slots busy, so later calls queue behind them.
	for wave := range 5 {
		for range 40 {
			wg.Go(func() {
				start := time.Now()
				err := b.Run(ctx, incr, []string{"n"}).Err()
				took := time.Since(start)
				if err == nil {
					t.Errorf("wave %d: a call to a frozen Redis succeeded", wave)
				}
				mu.Lock()
				worst = max(worst, took)
				mu.Unlock()
			})
		}
		time.Sleep(timeout / 4) // spacing the waves, not waiting for an event
	}
	wg.Wait()
	t.Logf("slowest failure: %v (timeout %v)", worst, timeout)
	// The old batcher made queued calls wait for the pipelines ahead: up to
	// three timeouts. A call now fails at its own deadline; the margin is for
	// a loaded -race run.
	if worst > timeout+timeout/2 {
		t.Errorf("a call took %v to fail with redis.timeout %v", worst, timeout)
	}
	if !b.Stalled() {
		t.Error("not Stalled after calls to a frozen Redis timed out")
	}
	node.Resume()
	if err := b.Run(ctx, incr, []string{"after"}).Err(); err != nil {
		// The first call after a freeze may meet a connection closed by the
		// timeouts; the next one must work.
		if err := b.Run(ctx, incr, []string{"after"}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if b.Stalled() {
		t.Error("still Stalled after an answered call")
	}
	// At most the two pipelines already written to the socket ran (at most
	// 40 calls each, the first wave); none of the calls queued behind them.
	if ran, _ := rdb.Get(ctx, "n").Int(); ran > 80 {
		t.Fatalf("%d calls ran after their callers gave up before they were sent", ran)
	}
}

func TestWaitForReplicas(t *testing.T) {
	primary, replica, _ := redistopo.StartReplicated(t)
	rdb := primary.Client()
	defer rdb.Close()
	ctx := context.Background()
	// The replica may still be in its first sync: wait (with a deadline sized
	// for a loaded machine) until it acknowledges a write.
	testenv.WaitFor(t, 60*time.Second, "the replica to acknowledge a write", func() bool {
		rdb.Incr(ctx, "sync:"+testenv.Unique())
		n, err := rdb.Do(ctx, "WAIT", 1, 200).Int()
		return err == nil && n == 1
	})
	tests := []struct {
		name     string
		replicas int
		pause    bool
		want     bool // replicated
	}{
		{"one replica in sync", 1, false, true},
		{"more replicas than exist", 2, false, false},
		{"the replica frozen", 1, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// WAIT gets half the deadline: a replica in sync on a loaded
			// machine gets 5 s to answer; the others need not wait that long.
			timeout := 2 * time.Second
			if tt.want {
				timeout = 10 * time.Second
			}
			b := redisbatch.New(rdb, redisbatch.Options{Timeout: timeout, MinReplicas: tt.replicas})
			if tt.pause {
				replica.Pause()
				defer replica.Resume()
			}
			key := "k:" + testenv.Unique()
			cmd := b.Run(ctx, incr, []string{key})
			var nr *redisbatch.NotReplicatedError
			replicated := !errors.As(cmd.Err(), &nr)
			if replicated != tt.want {
				t.Fatalf("replicated = %v (err %v), want %v", replicated, cmd.Err(), tt.want)
			}
			if !replicated && nr.Want != tt.replicas {
				t.Fatalf("error %v, want %d replicas", nr, tt.replicas)
			}
			// The reply is there either way: the write happened on the primary.
			if v, _ := cmd.Val().(int64); v != 1 {
				t.Fatalf("reply %v, want 1", cmd.Val())
			}
		})
	}
}

// scriptsFunc adapts a way of running scripts to ratelimit.Scripts.
type scriptsFunc func(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd

func (f scriptsFunc) Run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	return f(ctx, script, keys, args...)
}

// BenchmarkScripts compares the batcher with go-redis's own auto-pipelining
// and with plain calls, on the limiter's real decisions (fresh phone and IP
// each time, 24 callers), in interleaved rounds of one second each (the
// machine drifts from minute to minute), and reports each variant's median
// decisions/s and its median ratio to the batcher within a round. Run it
// with -benchtime 1x; SMSGW_BENCH_ROUNDS sets the rounds (default 5).
func BenchmarkScripts(b *testing.B) {
	rdb, prefix := testenv.Redis(b)
	ap, err := rdb.AutoPipeline()
	if err != nil {
		b.Fatal(err)
	}
	defer ap.Close()
	batcher := redisbatch.New(rdb, redisbatch.Options{Timeout: 5 * time.Second})
	variants := []struct {
		name    string
		scripts ratelimit.Scripts
	}{
		{"batcher", batcher},
		{"autopipeline", scriptsFunc(func(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
			return s.Run(ctx, ap, keys, args...)
		})},
		{"plain", scriptsFunc(func(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
			return s.Run(ctx, rdb, keys, args...)
		})},
	}
	rounds := testenv.BenchRounds(b, 5)
	rates := make(map[string][]float64)
	ratios := make(map[string][]float64)
	var seq atomic.Int64
	rules := []otp.Rule{{Window: time.Minute, Max: 5}, {Window: 10 * time.Minute, Max: 30}, {Window: time.Hour, Max: 50}}
	for b.Loop() {
		for range rounds {
			var base float64
			for _, v := range variants {
				l := ratelimit.New(rdb, prefix+v.name+":", ratelimit.Options{Scripts: v.scripts})
				var n atomic.Int64
				deadline := time.Now().Add(time.Second)
				var wg sync.WaitGroup
				for range 24 {
					wg.Go(func() {
						for time.Now().Before(deadline) {
							i := seq.Add(1)
							subjects := []otp.Subject{
								{Scope: "phone", Key: fmt.Sprint("phone:", i), Rules: rules},
								{Scope: "ip", Key: fmt.Sprint("ip:", i), Rules: rules},
							}
							if _, err := l.Allow(context.Background(), fmt.Sprint("t", i), subjects); err != nil {
								b.Error(err)
								return
							}
							n.Add(1)
						}
					})
				}
				wg.Wait()
				rate := float64(n.Load())
				if v.name == "batcher" {
					base = rate
				}
				rates[v.name] = append(rates[v.name], rate)
				ratios[v.name] = append(ratios[v.name], rate/base)
			}
		}
	}
	for _, v := range variants {
		b.ReportMetric(testenv.Median(rates[v.name]), v.name+"-decisions/s")
		if v.name != "batcher" {
			b.ReportMetric(testenv.Median(ratios[v.name]), v.name+"/batcher")
		}
	}
}

// TestWaitForReplicasOnCluster: each shard's calls wait for that shard's own
// replica; a frozen replica fails only its own shard's calls.
func TestWaitForReplicasOnCluster(t *testing.T) {
	c := redistopo.StartReplicatedCluster(t, 3)
	rdb := c.Client()
	defer rdb.Close()
	ctx := context.Background()
	b := redisbatch.New(rdb, redisbatch.Options{Timeout: 2 * time.Second, MinReplicas: 1})
	// One key per shard, in the order of the masters.
	keys := make([]string, 3)
	for i := 0; keys[0] == "" || keys[1] == "" || keys[2] == ""; i++ {
		k := fmt.Sprint("k", i)
		node, err := rdb.MasterForKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		for m := range 3 {
			if node.Options().Addr == c.Nodes[m].Addr && keys[m] == "" {
				keys[m] = k
			}
		}
	}
	run := func(frozen int) {
		t.Helper()
		var wg sync.WaitGroup
		for m, k := range keys {
			for range 10 {
				wg.Go(func() {
					cmd := b.Run(ctx, incr, []string{k})
					var nr *redisbatch.NotReplicatedError
					if got, want := errors.As(cmd.Err(), &nr), m == frozen; got != want {
						t.Errorf("shard %d (replica %d frozen): not replicated = %v (%v)", m, frozen, got, cmd.Err())
					}
					if _, ok := cmd.Val().(int64); !ok {
						t.Errorf("shard %d: no reply (%v)", m, cmd.Err())
					}
				})
			}
		}
		wg.Wait()
	}
	run(-1)
	c.Nodes[3].Pause() // the replica of the first master
	run(0)
	c.Nodes[3].Resume()
}
