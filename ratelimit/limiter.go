// Package ratelimit implements otp.Limiter on Redis: exact sliding windows
// kept as sorted sets, decided for all subjects in one atomic script.
package ratelimit

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/internal/redisbatch"
	"smsgw/otp"
)

var (
	//go:embed allow.lua
	allowSource string
	//go:embed status.lua
	statusSource string

	allowScript  = redis.NewScript(allowSource)
	statusScript = redis.NewScript(statusSource)
)

// Limiter is an otp.Limiter on one Redis primary. All keys of a decision are
// touched by one script, so on Redis Cluster they would have to share a slot;
// smsgw expects a single primary (with replicas or Sentinel for failover).
type Limiter struct {
	rdb      redis.Cmdable
	prefix   string
	scripts  Scripts
	refusals *refusals // nil: every decision asks Redis
	// now replaces Redis TIME; only tests set it.
	now func() time.Time
}

// Scripts runs Redis scripts; a *redisbatch.Batcher shares round trips
// between concurrent calls.
type Scripts interface {
	Run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd
}

var _ otp.Limiter = (*Limiter)(nil)

// Options tune a Limiter. Zero values pick the defaults.
type Options struct {
	// Scripts runs the decisions; nil gives the Limiter a batcher of its own.
	Scripts Scripts
	// LocalRefusals is how many standing refusals this replica may answer
	// from memory (0: none; every decision asks Redis). See Run.
	LocalRefusals int
}

// New returns a Limiter whose keys start with prefix (e.g. "smsgw:").
func New(rdb redis.Cmdable, prefix string, o Options) *Limiter {
	if o.Scripts == nil {
		o.Scripts = redisbatch.New(rdb, redisbatch.Options{})
	}
	l := &Limiter{rdb: rdb, prefix: prefix, scripts: o.Scripts}
	if o.LocalRefusals > 0 {
		l.refusals = newRefusals(o.LocalRefusals)
	}
	return l
}

func (l *Limiter) key(s otp.Subject) string { return l.prefix + "rl:" + s.Key }

// Allow decides the request for every window of every subject in one
// EVALSHA, pipelined with the decisions of concurrent requests.
func (l *Limiter) Allow(ctx context.Context, ticket string, subjects []otp.Subject) (otp.Decision, error) {
	if len(subjects) == 0 {
		return otp.Decision{Allowed: true}, nil
	}
	keys, args, policies := l.scriptArgs(ticket, subjects)
	start := time.Now()
	if l.refusals != nil {
		if f, ok := l.refusals.lookup(keys, start); ok {
			tight := f.window
			tight.Reset = f.until.Sub(start)
			return otp.Decision{Now: start, Tightest: tight, RetryAfter: tight.Reset, Policies: policies}, nil
		}
	}
	vals, err := l.scripts.Run(ctx, allowScript, keys, args...).Int64Slice()
	if err != nil {
		return otp.Decision{}, fmt.Errorf("ratelimit: allow: %w", err)
	}
	if len(vals) != 5 || vals[2] < 0 || int(vals[2]) > len(policies) {
		return otp.Decision{}, fmt.Errorf("ratelimit: allow: unexpected reply %v", vals)
	}
	var tight otp.Window
	if vals[2] == 0 {
		// Every window was empty: the tightest is the one with the least room
		// left after this request, which the rules alone decide.
		tight = tightestWhenEmpty(policies)
		tight.Used, tight.Reset = 1, tight.Rule.Window
	} else {
		tight = policies[vals[2]-1]
		tight.Used = int(vals[3])
		tight.Reset = time.Duration(vals[4]) * time.Microsecond
	}
	d := otp.Decision{
		Allowed:  vals[0] == 1,
		Now:      time.UnixMicro(vals[1]),
		Tightest: tight,
		Policies: policies,
	}
	if !d.Allowed {
		d.RetryAfter = tight.Reset
		if l.refusals != nil {
			// Counted from before the call left, so the local T is never
			// later than Redis's.
			l.refusals.remember(keys[l.subjectOf(subjects, vals[2])], refusal{until: start.Add(d.RetryAfter), window: tight})
		}
	}
	return d, nil
}

// subjectOf finds the subject of the window the script numbered tight.
func (l *Limiter) subjectOf(subjects []otp.Subject, tight int64) int {
	n := int64(0)
	for i, s := range subjects {
		n += int64(len(s.Rules))
		if tight <= n {
			return i
		}
	}
	return len(subjects) - 1
}

// scriptArgs lays out the subjects for allow.lua and status.lua, and lists
// their windows in the same order as the scripts number them.
func (l *Limiter) scriptArgs(ticket string, subjects []otp.Subject) (keys []string, args []any, policies []otp.Window) {
	keys = make([]string, len(subjects))
	nrules := 0
	for i, s := range subjects {
		keys[i] = l.key(s)
		nrules += len(s.Rules)
	}
	args = make([]any, 0, 2+2*len(subjects)+2*nrules)
	if l.now != nil {
		args = append(args, l.now().UnixMicro())
	} else {
		args = append(args, "")
	}
	args = append(args, ticket)
	policies = make([]otp.Window, 0, nrules)
	for _, s := range subjects {
		var longest time.Duration
		for _, r := range s.Rules {
			longest = max(longest, r.Window)
		}
		args = append(args, len(s.Rules), longest.Microseconds())
		for _, r := range s.Rules {
			args = append(args, r.Window.Microseconds(), r.Max)
			policies = append(policies, otp.Window{Scope: s.Scope, Rule: r})
		}
	}
	return keys, args, policies
}

// Status reads every window of the subjects on Redis's clock, changing
// nothing.
func (l *Limiter) Status(ctx context.Context, subjects []otp.Subject) ([]otp.Window, error) {
	if len(subjects) == 0 {
		return nil, nil
	}
	keys, args, windows := l.scriptArgs("", subjects)
	vals, err := statusScript.Run(ctx, l.rdb, keys, args...).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("ratelimit: status: %w", err)
	}
	if len(vals) != 1+2*len(windows) {
		return nil, fmt.Errorf("ratelimit: status: unexpected reply %v", vals)
	}
	for i := range windows {
		windows[i].Used = int(vals[1+2*i])
		windows[i].Reset = time.Duration(vals[2+2*i]) * time.Microsecond
	}
	return windows, nil
}

// Reset forgets every admitted request of the subjects.
func (l *Limiter) Reset(ctx context.Context, subjects []otp.Subject) error {
	if len(subjects) == 0 {
		return nil
	}
	keys := make([]string, len(subjects))
	for i, s := range subjects {
		keys[i] = l.key(s)
	}
	err := l.rdb.Del(ctx, keys...).Err()
	if err == nil {
		err = l.publish(ctx, keys)
	}
	if err != nil {
		return fmt.Errorf("ratelimit: reset: %w", err)
	}
	return nil
}

// tightestWhenEmpty picks, as the script does, the window with the smallest
// max, ties going to the longer window, then to the first.
func tightestWhenEmpty(policies []otp.Window) otp.Window {
	t := policies[0]
	for _, p := range policies[1:] {
		if p.Rule.Max < t.Rule.Max || (p.Rule.Max == t.Rule.Max && p.Rule.Window > t.Rule.Window) {
			t = p
		}
	}
	return t
}

// Refund removes an admitted request from every subject it was recorded in,
// and tells every replica's refusal cache. Removing a ticket that is not there
// is harmless, so a refund may be retried.
func (l *Limiter) Refund(ctx context.Context, ticket string, subjects []otp.Subject) error {
	keys := make([]string, len(subjects))
	_, err := l.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for i, s := range subjects {
			keys[i] = l.key(s)
			p.ZRem(ctx, keys[i], ticket)
		}
		return nil
	})
	if err == nil {
		err = l.publish(ctx, keys)
	}
	if err != nil {
		return fmt.Errorf("ratelimit: refund: %w", err)
	}
	return nil
}
