// Package redisbatch coalesces concurrent Redis script calls into pipelines.
package redisbatch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Scripts runs Redis scripts: a *Batcher shares round trips between
// concurrent calls; the stores take any (a region's home, a test's client).
type Scripts interface {
	Run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd
}

var _ Scripts = (*Batcher)(nil)

// Batcher sends script calls the way a database groups commits: a call that
// finds a pipeline slot free starts a pipeline at once, and every call that
// arrives while all slots are busy rides along in the next one. An idle
// service pays no added delay; under load one write and one read on each side
// serve many calls, which is most of what a small script costs. Each call is
// still its own atomic script.
//
// Every call is bounded by its own deadline (Timeout from when it was made),
// not by the pipelines ahead of it: when Redis stops answering, a call
// queued behind stuck pipelines fails at its deadline and is never sent.
type Batcher struct {
	rdb      redis.Cmdable
	slots    int           // pipelines in flight at most
	max      int           // calls in one pipeline at most
	timeout  time.Duration // bound on one call, queueing included
	replicas int           // WAIT for this many replicas after each pipeline

	mu      sync.Mutex
	queue   []*call
	running int           // drain goroutines
	stopped bool          // Serve's ctx ended: no new drain starts
	idle    chan struct{} // closed when the last drain ends after stopped

	// stalled: the last pipeline to finish got no answer in time, and none
	// has got one since.
	stalled atomic.Bool
}

// Stalled says Redis is not answering: the last pipeline timed out and none
// has been answered since. Work that may be skipped (giving quota back after
// a failure) need not wait its own timeout then.
func (b *Batcher) Stalled() bool { return b.stalled.Load() }

// Options tune a Batcher. Zero values pick the defaults.
type Options struct {
	// Pipelines is how many pipelines may be in flight at once (default 2).
	Pipelines int
	// Timeout bounds each call from the moment it is made, time spent
	// waiting for a pipeline included (default 1s). The caller's context
	// may end it sooner.
	Timeout time.Duration
	// MinReplicas > 0 ends every pipeline with WAIT: a call's writes count
	// only once that many replicas hold them. A call whose pipeline was not
	// acknowledged in time gets a *NotReplicatedError (its reply still in the
	// command). On Redis Cluster the calls go to each shard's primary in a
	// pipeline of their own, each ending with its WAIT.
	MinReplicas int
}

// NotReplicatedError says a call ran on the primary but fewer replicas than
// wanted acknowledged it in time: a failover could lose its writes.
type NotReplicatedError struct {
	Acked, Want int
}

func (e *NotReplicatedError) Error() string {
	return fmt.Sprintf("redis: written to the primary but only %d of %d replicas acknowledged in time", e.Acked, e.Want)
}

// New returns a Batcher on rdb.
func New(rdb redis.Cmdable, o Options) *Batcher {
	if o.Pipelines <= 0 {
		o.Pipelines = 2
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Second
	}
	return &Batcher{rdb: rdb, slots: o.Pipelines, max: 128, timeout: o.Timeout, replicas: max(o.MinReplicas, 0)}
}

type call struct {
	script   *redis.Script
	keys     []string
	args     []any
	deadline time.Time
	cmd      *redis.Cmd
	// done gets one value when the batcher is through with the call (its
	// cmd is set): a buffered channel rather than a closed one, so that a
	// call whose caller took its answer is reused (calls).
	done chan struct{}
	gone atomic.Bool // the caller stopped waiting; if not yet sent, it never is
}

// calls are calls whose callers took their answers: the batcher let go of
// each before it said done, so one is reused as new. A call whose caller
// gave up is never put back (the batcher may still hold it). A call and
// its channel were two allocations a call.
var calls = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

// newCall is a call from the pool, set for the caller.
func newCall(script *redis.Script, keys []string, args []any, deadline time.Time) *call {
	c := calls.Get().(*call)
	c.script, c.keys, c.args, c.deadline = script, keys, args, deadline
	return c
}

// free puts back a call whose answer was taken, keeping nothing of it.
func free(c *call) {
	*c = call{done: c.done}
	calls.Put(c)
}

// Run runs script (EVALSHA, loading it after a SCRIPT FLUSH or a restart) and
// waits for its answer, for ctx, or for the batcher's timeout, whichever
// comes first. A call given up before its pipeline left is never sent; one
// given up later may still run, and its caller, having got an error, must
// assume its effects may have happened.
func (b *Batcher) Run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	// RunAll's work for one call, without its slices: every decision comes
	// this way.
	deadline := b.deadline(ctx)
	c := newCall(script, keys, args, deadline)
	if !b.enqueue(c) {
		free(c)
		return stoppedCmd(ctx)
	}
	return b.wait(ctx, c, deadline)
}

// Call is one script call of RunAll.
type Call struct {
	Script *redis.Script
	Keys   []string
	Args   []any
}

// RunAll runs the calls as Run does, and at once: they join the queue
// together, so they leave in one pipeline (on a Cluster, split by shard and
// sent to every shard at once), never one waiting behind another's.
func (b *Batcher) RunAll(ctx context.Context, calls []Call) []*redis.Cmd {
	deadline := b.deadline(ctx)
	cs := make([]*call, len(calls))
	for i, c := range calls {
		cs[i] = newCall(c.Script, c.Keys, c.Args, deadline)
	}
	cmds := make([]*redis.Cmd, len(calls))
	if !b.enqueue(cs...) {
		for i := range cmds {
			cmds[i] = stoppedCmd(ctx)
			free(cs[i])
		}
		return cmds
	}
	for i, c := range cs {
		cmds[i] = b.wait(ctx, c, deadline)
	}
	return cmds
}

// deadline is when a call made now with ctx must have its answer.
func (b *Batcher) deadline(ctx context.Context) time.Time {
	deadline := time.Now().Add(b.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	return deadline
}

// enqueue queues the calls together, starting a pipeline if a slot is
// free; false once Serve has stopped the batcher.
func (b *Batcher) enqueue(cs ...*call) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped && b.running == 0 {
		return false
	}
	b.queue = append(b.queue, cs...)
	if b.running < b.slots && !b.stopped {
		b.running++
		go b.drain()
	}
	return true
}

func stoppedCmd(ctx context.Context) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(ErrStopped)
	return cmd
}

// wait waits for c's answer, for ctx, or for its deadline. c is not the
// caller's after.
func (b *Batcher) wait(ctx context.Context, c *call, deadline time.Time) *redis.Cmd {
	timer := getTimer(time.Until(deadline))
	defer putTimer(timer)
	var err error
	select {
	case <-c.done:
		cmd := c.cmd
		free(c)
		return cmd
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = context.DeadlineExceeded
		b.stalled.Store(true) // until a pipeline is answered
	}
	c.gone.Store(true)
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(fmt.Errorf("redis: no answer in time: %w", err))
	return cmd
}

// timers are stopped timers for wait: a timer and its channel are two
// allocations a call, for one that almost never fires. A stopped timer's
// channel has no stale value (Go 1.23), so it is reused as new.
var timers sync.Pool

func getTimer(d time.Duration) *time.Timer {
	if t, ok := timers.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

func putTimer(t *time.Timer) {
	t.Stop()
	timers.Put(t)
}

// ErrStopped is what a call gets once Serve has returned.
var ErrStopped = errors.New("redis: the pipelines are stopped (shutting down)")

// Serve owns the goroutines that send pipelines: a call starts one when a
// slot is free, and Serve, once ctx ends, starts no more and waits for those
// in flight, each bounded by its calls' deadlines. The composition root runs
// it among its loops, so none outlives the service and the Redis client is
// closed after the last pipeline. Until then a Batcher works whether Serve
// runs or not (tests, the packages' own defaults); after, every call fails
// with ErrStopped.
func (b *Batcher) Serve(ctx context.Context) error {
	<-ctx.Done()
	b.mu.Lock()
	b.stopped = true
	if b.running == 0 {
		b.mu.Unlock()
		return nil
	}
	b.idle = make(chan struct{})
	idle := b.idle
	b.mu.Unlock()
	<-idle
	return nil
}

// drain sends pipelines until the queue is empty, then frees its slot.
func (b *Batcher) drain() {
	for {
		b.mu.Lock()
		n := min(len(b.queue), b.max)
		if n == 0 {
			b.running--
			if b.running == 0 && b.idle != nil {
				close(b.idle)
				b.idle = nil
			}
			b.mu.Unlock()
			return
		}
		batch := b.queue[:n:n]
		b.queue = append([]*call(nil), b.queue[n:]...)
		b.mu.Unlock()
		b.send(batch)
	}
}

func (b *Batcher) send(batch []*call) {
	// Calls whose callers gave up are dropped; the pipeline may run until the
	// last remaining caller's deadline.
	live := batch[:0:0]
	var last time.Time
	for _, c := range batch {
		if c.gone.Load() {
			continue
		}
		live = append(live, c)
		if c.deadline.After(last) {
			last = c.deadline
		}
	}
	if len(live) > 0 {
		ctx, cancel := context.WithDeadline(context.Background(), last)
		b.exec(ctx, live)
		b.reloadMissing(ctx, live)
		cancel()
		err := live[0].cmd.Err()
		var netErr net.Error
		b.stalled.Store(errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout())
	}
	for _, c := range batch {
		c.done <- struct{}{} // c is not the batcher's after
	}
}

// reloadMissing loads scripts that Redis lost (SCRIPT FLUSH, a restart, a
// failover to a replica that never loaded them) and resends the calls that
// missed them.
func (b *Batcher) reloadMissing(ctx context.Context, batch []*call) {
	var missed []*call
	loaded := map[*redis.Script]error{}
	for _, c := range batch {
		if err := c.cmd.Err(); err == nil || !redis.HasErrorPrefix(err, "NOSCRIPT") {
			continue // HasErrorPrefix allocates, even for no error
		}
		if _, ok := loaded[c.script]; !ok {
			loaded[c.script] = c.script.Load(ctx, b.rdb).Err()
			if m := mergeOf(c.script); m != nil && loaded[c.script] == nil {
				// The call may have gone merged: its merged script is lost too.
				loaded[c.script] = m.Script.Load(ctx, b.rdb).Err()
			}
		}
		if loaded[c.script] == nil {
			missed = append(missed, c)
		}
	}
	if len(missed) > 0 {
		b.exec(ctx, missed)
	}
}

func (b *Batcher) exec(ctx context.Context, batch []*call) {
	if cc, ok := b.rdb.(*redis.ClusterClient); ok && b.replicas > 0 {
		b.execPerPrimary(ctx, cc, batch)
		return
	}
	_, single := b.rdb.(*redis.Client) // not Cluster, not Ring: a merged call's keys may be anywhere
	b.execOn(ctx, b.rdb, batch, single)
}

// execPerPrimary sends each shard's calls to its primary, so that each
// pipeline's WAIT covers the writes it follows. A call whose shard cannot be
// found fails; one that meets a moved slot fails with MOVED (the cluster
// client reloads its map meanwhile).
func (b *Batcher) execPerPrimary(ctx context.Context, cc *redis.ClusterClient, batch []*call) {
	byNode := map[*redis.Client][]*call{}
	for _, c := range batch {
		node, err := cc.MasterForKey(ctx, c.keys[0])
		if err != nil {
			c.cmd = redis.NewCmd(ctx)
			c.cmd.SetErr(err)
			continue
		}
		byNode[node] = append(byNode[node], c)
	}
	var wg sync.WaitGroup
	for node, calls := range byNode {
		wg.Go(func() { b.execOn(ctx, node, calls, false) })
	}
	wg.Wait()
}

// execOn sends the batch in one pipeline on rdb; with merge, calls of a
// script with a Merge go as merged calls (see Merge).
func (b *Batcher) execOn(ctx context.Context, rdb redis.Cmdable, batch []*call, merge bool) {
	pipe := rdb.Pipeline()
	var merged []*mergedCall
	if merge {
		merged = mergeCalls(batch)
	}
	if merged == nil {
		for _, c := range batch {
			c.cmd = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
		}
	} else {
		for _, g := range merged {
			g.send(ctx, pipe)
		}
	}
	var wait *redis.IntCmd
	if b.replicas > 0 {
		// WAIT on the pipeline's own connection covers every write above.
		// It gives up halfway to the pipeline's deadline so that its answer
		// (how many replicas did acknowledge) still arrives in time on a
		// busy machine; a replica in sync answers in a millisecond or two.
		d, _ := ctx.Deadline()
		ms := max(time.Until(d).Milliseconds()/2, 1)
		wait = redis.NewIntCmd(ctx, "wait", b.replicas, ms)
		_ = pipe.Process(ctx, wait)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	for _, g := range merged {
		g.split(ctx)
	}
	if wait == nil {
		return
	}
	acked, err := wait.Result()
	if err == nil && int(acked) >= b.replicas {
		return
	}
	for _, c := range batch {
		if c.cmd.Err() == nil {
			c.cmd.SetErr(&NotReplicatedError{Acked: int(acked), Want: b.replicas})
		}
	}
}
