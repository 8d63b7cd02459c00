package redisbatch

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Merge lets a Batcher send several calls of one script, found in the same
// pipeline, as one call of another script that runs them in turn. Redis
// pays a script call's fixed cost once for the lot: parsing the request,
// finding the script, making KEYS and ARGV, calling into Lua, the garbage
// collector's step, the reply (docs/measurements/2026-11-27-limiter-batched-calls.md).
//
// The merged script's protocol, which every Merge follows:
//
//   - It runs each call as the script would alone, in the calls' order,
//     each to its end before the next begins: each call is still atomic
//     (a script is atomic as a whole, and the calls only share its turn).
//   - It replies a list with one element a call, in order: the call's
//     reply, or its error (a redis.call error or a Lua error caught by
//     pcall, as an error reply: {err = ...}); one call's error does not
//     stop the others.
//   - Args lays out its KEYS and ARGV from the calls; Same says which calls
//     Args can lay out together.
//
// Calls are merged only on a single Redis (a *redis.Client: not Cluster or
// Ring, where a merged call's keys could be on several slots), and only
// those in one pipeline, which have no order among them: the merged call
// takes the place of the first of them. A merged call that fails as a whole
// (NOSCRIPT, a timeout, a lost connection) fails each of its calls with that
// error; NOSCRIPT loads the script and its merged script and sends again.
type Merge struct {
	// Script runs the merged calls.
	Script *redis.Script
	// Same says whether a and b may be in one merged call.
	Same func(a, b Call) bool
	// Args is the merged call's KEYS and ARGV for calls (two or more, all
	// the Same as the first), in order.
	Args func(calls []Call) (keys []string, args []any)
}

// merges holds each registered script's *Merge.
var merges sync.Map

// Mergeable registers m for script's calls in every Batcher. A package
// registers its scripts' merges once, before its first call.
func Mergeable(script *redis.Script, m Merge) {
	merges.Store(script, &m)
}

func mergeOf(script *redis.Script) *Merge {
	if m, ok := merges.Load(script); ok {
		return m.(*Merge)
	}
	return nil
}

// mergedCall is one command of a pipeline: one call as itself, or several
// merged.
type mergedCall struct {
	merge *Merge // nil: calls[0] alone
	calls []*call
	cmd   *redis.Cmd
}

// mergeCalls groups the batch's calls into merged calls, in order of their
// first call; nil when no two calls can be merged (each call is sent as
// itself).
func mergeCalls(batch []*call) []*mergedCall {
	mergeable := 0
	for _, c := range batch {
		if mergeOf(c.script) != nil {
			mergeable++
		}
	}
	if mergeable < 2 {
		return nil // no slices made for a pipeline of other scripts
	}
	any2 := false
	groups := make([]*mergedCall, 0, len(batch)-mergeable+1)
	for _, c := range batch {
		m := mergeOf(c.script)
		if m != nil {
			found := false
			for _, g := range groups {
				if g.merge == m && g.calls[0].script == c.script && m.Same(g.calls[0].public(), c.public()) {
					g.calls = append(g.calls, c)
					found, any2 = true, true
					break
				}
			}
			if found {
				continue
			}
		}
		groups = append(groups, &mergedCall{merge: m, calls: []*call{c}})
	}
	if !any2 {
		return nil
	}
	return groups
}

func (c *call) public() Call { return Call{Script: c.script, Keys: c.keys, Args: c.args} }

// send queues the call on pipe.
func (g *mergedCall) send(ctx context.Context, pipe redis.Pipeliner) {
	if len(g.calls) == 1 {
		c := g.calls[0]
		c.cmd = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
		return
	}
	calls := make([]Call, len(g.calls))
	for i, c := range g.calls {
		calls[i] = c.public()
	}
	keys, args := g.merge.Args(calls)
	g.cmd = g.merge.Script.EvalSha(ctx, pipe, keys, args...)
}

// split gives each merged call its own reply (or error) from the merged
// reply.
func (g *mergedCall) split(ctx context.Context) {
	if len(g.calls) == 1 {
		return
	}
	replies, err := g.cmd.Slice()
	if err == nil && len(replies) != len(g.calls) {
		err = fmt.Errorf("redis: a merged call answered %d replies for %d calls", len(replies), len(g.calls))
	}
	for i, c := range g.calls {
		c.cmd = redis.NewCmd(ctx)
		switch {
		case err != nil:
			c.cmd.SetErr(err)
		case replies[i] == nil:
			c.cmd.SetErr(redis.Nil) // as EVALSHA answers a script's nil
		default:
			if e, ok := replies[i].(error); ok {
				c.cmd.SetErr(e)
			} else {
				c.cmd.SetVal(replies[i])
			}
		}
	}
}
