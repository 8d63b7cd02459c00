// Package redisbatch coalesces concurrent Redis script calls into pipelines.
package redisbatch

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Batcher sends script calls the way a database groups commits: a call that
// finds a pipeline slot free starts a pipeline at once, and every call that
// arrives while all slots are busy rides along in the next one. An idle
// service pays no added delay; under load one write and one read on each side
// serve many calls, which is most of what a small script costs. Each call is
// still its own atomic script.
type Batcher struct {
	rdb     redis.Cmdable
	slots   int           // pipelines in flight at most
	max     int           // calls in one pipeline at most
	timeout time.Duration // bound on one pipeline's round trip

	mu      sync.Mutex
	queue   []*call
	running int
}

// Options tune a Batcher. Zero values pick the defaults.
type Options struct {
	// Pipelines is how many pipelines may be in flight at once (default 2).
	Pipelines int
	// Timeout bounds one pipeline's round trip (default 1s). The Redis
	// client's own timeouts apply too; the shorter wins.
	Timeout time.Duration
}

// New returns a Batcher on rdb.
func New(rdb redis.Cmdable, o Options) *Batcher {
	if o.Pipelines <= 0 {
		o.Pipelines = 2
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Second
	}
	return &Batcher{rdb: rdb, slots: o.Pipelines, max: 128, timeout: o.Timeout}
}

type call struct {
	script *redis.Script
	keys   []string
	args   []any
	cmd    *redis.Cmd
	done   chan struct{}
}

// Run runs script (EVALSHA, loading it after a SCRIPT FLUSH or a restart) and
// waits for its answer or for ctx. A call abandoned by its caller still runs:
// its effects happen, and the caller, having got an error, must assume they
// may have.
func (b *Batcher) Run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	c := &call{script: script, keys: keys, args: args, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	if b.running < b.slots {
		b.running++
		go b.drain()
	}
	b.mu.Unlock()
	select {
	case <-c.done:
		return c.cmd
	case <-ctx.Done():
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(ctx.Err())
		return cmd
	}
}

// drain sends pipelines until the queue is empty, then frees its slot.
func (b *Batcher) drain() {
	for {
		b.mu.Lock()
		n := min(len(b.queue), b.max)
		if n == 0 {
			b.running--
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
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	b.exec(ctx, batch)
	// After SCRIPT FLUSH or a Redis restart a script is gone: load it again
	// and resend the calls that missed it.
	var missed []*call
	loaded := map[*redis.Script]error{}
	for _, c := range batch {
		if !redis.HasErrorPrefix(c.cmd.Err(), "NOSCRIPT") {
			continue
		}
		if _, ok := loaded[c.script]; !ok {
			loaded[c.script] = c.script.Load(ctx, b.rdb).Err()
		}
		if loaded[c.script] == nil {
			missed = append(missed, c)
		}
	}
	if len(missed) > 0 {
		b.exec(ctx, missed)
	}
	for _, c := range batch {
		close(c.done)
	}
}

func (b *Batcher) exec(ctx context.Context, batch []*call) {
	pipe := b.rdb.Pipeline()
	for _, c := range batch {
		c.cmd = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
}
