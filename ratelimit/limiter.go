// Package ratelimit implements otp.Limiter on Redis: exact sliding windows
// kept as sorted sets, decided for all subjects in one atomic script on one
// primary, and by reserve-then-commit across the shards of a Redis Cluster.
package ratelimit

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/internal/luascript"
	"smsgw/internal/redisbatch"
	"smsgw/otp"
)

// Limiter is an otp.Limiter. On one primary (with or without Sentinel) a
// decision is one script over every subject's keys: one round trip. On Redis
// Cluster each subject's keys share a hash tag, so its windows live on one
// shard; a decision whose subjects all hash to one slot is still one script,
// and one whose subjects are spread out reserves on each shard, then
// commits or releases (see cluster.go).
type Limiter struct {
	rdb      redis.UniversalClient
	prefix   string
	scripts  Scripts
	cluster  bool
	lease    time.Duration
	refusals *refusals // nil: every decision asks Redis
	// contention counts refusals owed only to other requests' reservations.
	contention atomic.Uint64
	// now replaces Redis TIME; only tests set it.
	now func() time.Time
	// policies is the last list policiesOf made, shared read-only.
	policies atomic.Pointer[[]otp.Window]
}

// luaFiles are the package's scripts, each loaded after the prelude every
// script shares (package luascript).
//
//go:embed *.lua
var luaFiles embed.FS

var (
	allowScript  = luascript.Script(luaFiles, "allow.lua")
	statusScript = luascript.Script(luaFiles, "status.lua")
	settleScript = luascript.Script(luaFiles, "settle.lua")
	// allowBatchScript runs allow.lua for several decisions in one call.
	allowBatchScript = luascript.Script(luaFiles, "allowbatch.lua",
		"local function allow(KEYS, ARGV)\n"+AllowLua()+"\nend\n")
)

func init() {
	redisbatch.Mergeable(allowScript, redisbatch.Merge{Script: allowBatchScript, Same: sameAllowShape, Args: allowBatchArgs})
}

// Scripts runs Redis scripts (redisbatch.Scripts, one interface for every
// package that runs them).
type Scripts = redisbatch.Scripts

var _ otp.Limiter = (*Limiter)(nil)

// Options tune a Limiter. Zero values pick the defaults.
type Options struct {
	// Scripts runs the decisions; nil gives the Limiter a batcher of its own.
	Scripts Scripts
	// LocalRefusals is how many standing refusals this replica may answer
	// from memory (0: none; every decision asks Redis). See Run.
	LocalRefusals int
	// ReservationLease is how long a reservation on Redis Cluster counts
	// if its decision is never committed (a replica died in between);
	// default 5s. It must be well above redis.timeout.
	ReservationLease time.Duration
}

// New returns a Limiter whose keys start with prefix (e.g. "smsgw:"). It
// works across shards when rdb is a *redis.ClusterClient.
func New(rdb redis.UniversalClient, prefix string, o Options) *Limiter {
	if o.Scripts == nil {
		o.Scripts = redisbatch.New(rdb, redisbatch.Options{})
	}
	if o.ReservationLease <= 0 {
		o.ReservationLease = 5 * time.Second
	}
	_, cluster := rdb.(*redis.ClusterClient)
	l := &Limiter{rdb: rdb, prefix: prefix, scripts: o.Scripts, cluster: cluster, lease: o.ReservationLease}
	if o.LocalRefusals > 0 {
		l.refusals = newRefusals(o.LocalRefusals)
	}
	return l
}

// key is the subject's sorted set. The subject's key is the hash tag, so on
// Cluster its sets (and nothing of another subject's) share a slot.
func (l *Limiter) key(s otp.Subject) string { return l.prefix + "rl:{" + s.Key + "}" }

// pendingKey is the subject's set of reservations not yet committed.
func (l *Limiter) pendingKey(s otp.Subject) string { return l.key(s) + pendingSuffix }

const pendingSuffix = ":r"

// ContentionRefusals counts refusals owed only to other requests' pending
// reservations on Redis Cluster (they would have been admitted had those
// been committed or released already).
func (l *Limiter) ContentionRefusals() uint64 { return l.contention.Load() }

// Allow decides the request for every window of every subject. On one
// primary, or when every subject is on one slot, it is one EVALSHA,
// pipelined with the decisions of concurrent requests.
func (l *Limiter) Allow(ctx context.Context, ticket string, subjects []otp.Subject) (otp.Decision, error) {
	return l.decide(ctx, ticket, subjects, false)
}

// decide is Allow, or with reserveOnly Reserve.
func (l *Limiter) decide(ctx context.Context, ticket string, subjects []otp.Subject, reserveOnly bool) (otp.Decision, error) {
	if len(subjects) == 0 {
		return otp.Decision{Allowed: true}, nil
	}
	start := time.Now()
	keys := l.subjectKeys(subjects) // the refusal cache's, and one primary's KEYS
	if d, ok := l.remembered(subjects, keys, start); ok {
		return d, nil
	}
	var (
		d   otp.Decision
		r   shardReply
		err error
	)
	if !l.cluster && !reserveOnly {
		d, r, err = l.allowOne(ctx, ticket, subjects, keys, 0) // one group, and no slice of groups made
	} else if groups := l.slots(subjects); reserveOnly {
		d, r, err = l.reserve(ctx, ticket, subjects, groups)
	} else if len(groups) > 1 {
		d, r, err = l.allowAcross(ctx, ticket, subjects, groups)
	} else {
		d, r, err = l.allowOne(ctx, ticket, subjects, keys, 0)
	}
	if err != nil {
		return otp.Decision{}, err
	}
	l.noteRefusal(d, r, start)
	return d, nil
}

// Remembered is a refusal of subjects this replica remembers, answered
// without Redis (what the send admitters' otp.RefusalMemory answers): what
// Allow and Windows would answer.
func (l *Limiter) Remembered(subjects []otp.Subject) (otp.Decision, bool) {
	if len(subjects) == 0 {
		return otp.Decision{}, false
	}
	return l.remembered(subjects, nil, time.Now())
}

// remembered answers a refusal this replica remembers, without Redis. keys
// are the subjects' keys when the caller has made them already (nil: made
// here).
func (l *Limiter) remembered(subjects []otp.Subject, keys []string, now time.Time) (otp.Decision, bool) {
	if l.refusals == nil {
		return otp.Decision{}, false
	}
	if keys == nil {
		keys = l.subjectKeys(subjects)
	}
	f, ok := l.refusals.lookup(keys, now)
	if !ok {
		return otp.Decision{}, false
	}
	tight := f.window
	tight.Reset = f.until.Sub(now)
	return otp.Decision{Now: now, Tightest: tight, RetryAfter: tight.Reset, Policies: l.policiesOf(subjects)}, true
}

// noteRefusal remembers a refusal decided by a call that left at start.
func (l *Limiter) noteRefusal(d otp.Decision, r shardReply, start time.Time) {
	if !d.Allowed && l.refusals != nil && r.pending == 0 {
		// Counted from before the call left, so the local T is never later
		// than Redis's. A refusal owed in part to reservations is not kept:
		// their release gives quota back without a message.
		l.refusals.remember(l.key(r.refusing), refusal{until: start.Add(d.RetryAfter), window: d.Tightest})
	}
}

// shardReply is one allow.lua answer, read.
type shardReply struct {
	allowed  bool
	now      time.Time
	tight    otp.Window   // the bounding window, Used and Reset filled in
	refusing otp.Subject  // the refused subject, when refused
	pending  int64        // reservations counted in the refusing windows
	conflict bool         // refused only because of reservations
	policies []otp.Window // the windows of this call, in order
}

// allowOne runs allow.lua over subjects on one primary or one slot. A lease
// > 0 reserves instead of recording for good. keys are the subjects' keys
// when the caller has made them already (nil: made here).
func (l *Limiter) allowOne(ctx context.Context, ticket string, subjects []otp.Subject, keys []string, lease time.Duration) (otp.Decision, shardReply, error) {
	if keys == nil || lease > 0 {
		keys = l.allowKeys(subjects, lease > 0)
	}
	cmd := l.scripts.Run(ctx, allowScript, keys, l.allowArgs(ticket, lease, subjects).argv()...)
	err := cmd.Err()
	var notReplicated *redisbatch.NotReplicatedError
	if err != nil {
		if notReplicated = asNotReplicated(err); notReplicated == nil {
			return otp.Decision{}, shardReply{}, fmt.Errorf("ratelimit: allow: %w", err)
		}
	}
	r, err := l.readAllow(cmd.Val(), subjects)
	if err != nil {
		return otp.Decision{}, shardReply{}, err
	}
	if notReplicated != nil && r.allowed {
		// Admitted on the primary, but a failover could forget it: take it
		// back and fail closed rather than text on a record that may vanish.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if rerr := l.Refund(rctx, ticket, subjects); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return otp.Decision{}, shardReply{}, fmt.Errorf("ratelimit: allow: %w", errors.Join(notReplicated, err))
	}
	return r.decision(), r, nil
}

// asNotReplicated is err's *redisbatch.NotReplicatedError, or nil. Its own
// function: the variable errors.As fills escapes, an allocation every
// decision would pay where it is declared.
func asNotReplicated(err error) *redisbatch.NotReplicatedError {
	var e *redisbatch.NotReplicatedError
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// readAllow reads allow.lua's reply to a call over subjects.
func (l *Limiter) readAllow(v any, subjects []otp.Subject) (shardReply, error) {
	policies := l.policiesOf(subjects)
	a, err := parseAllowReply(v, len(policies))
	if err != nil {
		return shardReply{}, fmt.Errorf("ratelimit: allow: %w", err)
	}
	r := shardReply{allowed: a.allowed, now: a.now, pending: a.pending, conflict: a.contention, policies: policies}
	if a.tight == 0 {
		// Every window was empty: the tightest is the one with the least room
		// left after this request, which the rules alone decide.
		r.tight = tightestWhenEmpty(policies)
		r.tight.Used, r.tight.Reset = 1, r.tight.Rule.Window
	} else {
		r.tight = policies[a.tight-1]
		r.tight.Used = a.used
		r.tight.Reset = a.reset
		r.refusing = subjects[subjectOf(subjects, int64(a.tight))]
	}
	if r.conflict {
		l.contention.Add(1)
	}
	return r, nil
}

func (r shardReply) decision() otp.Decision {
	d := otp.Decision{Allowed: r.allowed, Now: r.now, Tightest: r.tight, Policies: r.policies}
	if !r.allowed {
		d.RetryAfter = r.tight.Reset
	}
	return d
}

// subjectOf finds the subject of the window the script numbered tight.
func subjectOf(subjects []otp.Subject, tight int64) int {
	n := int64(0)
	for i, s := range subjects {
		n += int64(len(s.Rules))
		if tight <= n {
			return i
		}
	}
	return len(subjects) - 1
}

func (l *Limiter) subjectKeys(subjects []otp.Subject) []string {
	keys := make([]string, len(subjects))
	for i, s := range subjects {
		keys[i] = l.key(s)
	}
	return keys
}

// PoliciesOf lists the subjects' windows in the order the scripts number
// them: a Decision's Policies.
func PoliciesOf(subjects []otp.Subject) []otp.Window {
	var policies []otp.Window
	for _, s := range subjects {
		for _, r := range s.Rules {
			policies = append(policies, otp.Window{Scope: s.Scope, Name: s.Name, Rule: r})
		}
	}
	return policies
}

// policiesOf is PoliciesOf, reusing the last list made while the subjects
// have the same windows, as every request's do but those naming other limit
// keys: a list a request (0.9 KB) for every decision, the refused path's
// largest allocation (docs/measurements/2026-11-26-refused-path.md). The
// list is shared: no one may change its elements, and its capacity is its
// length, so an append copies it.
func (l *Limiter) policiesOf(subjects []otp.Subject) []otp.Window {
	if p := l.policies.Load(); p != nil && samePolicies(*p, subjects) {
		return *p
	}
	p := slices.Clip(PoliciesOf(subjects))
	l.policies.Store(&p)
	return p
}

// samePolicies says whether p is PoliciesOf(subjects).
func samePolicies(p []otp.Window, subjects []otp.Subject) bool {
	i := 0
	for _, s := range subjects {
		for _, r := range s.Rules {
			if i == len(p) || p[i].Scope != s.Scope || p[i].Name != s.Name || p[i].Rule != r {
				return false
			}
			i++
		}
	}
	return i == len(p)
}

// allowKeys is allow.lua's KEYS (and, without pending sets, status.lua's):
// the subjects' sorted sets, then with pending their pending sets.
func (l *Limiter) allowKeys(subjects []otp.Subject, pending bool) []string {
	keys := l.subjectKeys(subjects)
	if pending {
		keys = withPending(keys)
	}
	return keys
}

// withPending is a new list of keys, the subjects' sets, then their pending
// sets (pendingKey).
func withPending(keys []string) []string {
	out := make([]string, len(keys), 2*len(keys))
	copy(out, keys)
	for _, k := range keys {
		out = append(out, k+pendingSuffix)
	}
	return out
}

// allowArgs is allow.lua's (and status.lua's) ARGV on this Limiter's clock:
// Redis's, unless a test set one.
func (l *Limiter) allowArgs(ticket string, lease time.Duration, subjects []otp.Subject) allowArgs {
	a := allowArgs{ticket: ticket, lease: lease, subjects: subjects}
	if l.now != nil {
		a.now = l.now()
	}
	return a
}

// Reset forgets every admitted request of the subjects.
func (l *Limiter) Reset(ctx context.Context, subjects []otp.Subject) error {
	if len(subjects) == 0 {
		return nil
	}
	_, err := l.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, s := range subjects {
			p.Del(ctx, l.key(s), l.pendingKey(s)) // one slot: one hash tag
		}
		return nil
	})
	if err == nil {
		err = l.publish(ctx, l.subjectKeys(subjects))
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
// is harmless, so a refund may be retried. When Redis has just stopped
// answering, Refund fails at once rather than wait for it: the quota stays
// used (never admitting more), and the failed request's 503 is not delayed.
func (l *Limiter) Refund(ctx context.Context, ticket string, subjects []otp.Subject) error {
	if s, ok := l.scripts.(interface{ Stalled() bool }); ok && s.Stalled() {
		return fmt.Errorf("ratelimit: refund: %w", errStalled)
	}
	if err := l.settle(ctx, ticket, settleRelease, l.slots(subjects)); err != nil {
		return fmt.Errorf("ratelimit: refund: %w", err)
	}
	if err := l.publish(ctx, l.subjectKeys(subjects)); err != nil {
		return fmt.Errorf("ratelimit: refund: %w", err)
	}
	return nil
}

var errStalled = errors.New("redis is not answering; the quota stays used")
