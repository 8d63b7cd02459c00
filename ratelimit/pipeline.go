package ratelimit

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// pipeliner coalesces concurrent script calls into Redis pipelines, the way a
// database groups commits: a call that finds a pipeline slot free starts one
// at once, and every call that arrives while all slots are busy rides along
// in the next pipeline. An idle service pays no added delay; under load one
// write and one read on each side serve many decisions, which is most of what
// a decision costs. Each decision is still its own atomic script.
type pipeliner struct {
	rdb     redis.Cmdable
	script  *redis.Script
	slots   int           // pipelines in flight at most
	max     int           // calls in one pipeline at most
	timeout time.Duration // bound on one pipeline's round trip

	mu      sync.Mutex
	queue   []*scriptCall
	running int
}

type scriptCall struct {
	keys []string
	args []any
	vals []int64
	err  error
	done chan struct{}
}

// run queues the call and waits for its answer or for ctx. A call abandoned
// by its caller still runs: its decision is made and recorded, and the caller,
// having got an error, fails closed.
func (p *pipeliner) run(ctx context.Context, keys []string, args []any) ([]int64, error) {
	c := &scriptCall{keys: keys, args: args, done: make(chan struct{})}
	p.mu.Lock()
	p.queue = append(p.queue, c)
	if p.running < p.slots {
		p.running++
		go p.drain()
	}
	p.mu.Unlock()
	select {
	case <-c.done:
		return c.vals, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// drain sends pipelines until the queue is empty, then frees its slot.
func (p *pipeliner) drain() {
	for {
		p.mu.Lock()
		n := min(len(p.queue), p.max)
		if n == 0 {
			p.running--
			p.mu.Unlock()
			return
		}
		batch := p.queue[:n:n]
		p.queue = append([]*scriptCall(nil), p.queue[n:]...)
		p.mu.Unlock()
		p.send(batch)
	}
}

func (p *pipeliner) send(batch []*scriptCall) {
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	cmds := p.exec(ctx, batch)
	// After SCRIPT FLUSH or a Redis restart the script is gone: load it
	// again and resend the calls that missed it.
	var missed []*scriptCall
	var at []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			missed, at = append(missed, batch[i]), append(at, i)
		}
	}
	if len(missed) > 0 {
		if err := p.script.Load(ctx, p.rdb).Err(); err == nil {
			for j, cmd := range p.exec(ctx, missed) {
				cmds[at[j]] = cmd
			}
		}
	}
	for i, c := range batch {
		c.vals, c.err = cmds[i].Int64Slice()
		close(c.done)
	}
}

func (p *pipeliner) exec(ctx context.Context, batch []*scriptCall) []*redis.Cmd {
	pipe := p.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(batch))
	for i, c := range batch {
		cmds[i] = p.script.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	return cmds
}
