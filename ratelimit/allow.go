package ratelimit

import (
	"fmt"
	"strconv"
	"time"

	"smsgw/internal/redisbatch"
	"smsgw/otp"
)

// The protocol of allow.lua, which decides one request for every window of
// every subject on one primary or one Cluster slot, atomically. status.lua
// reads the same layout.
//
// KEYS: one sorted set per subject (members are request tickets, scores the
// microsecond at which each was admitted, on Redis's clock); with a lease,
// then as many pending sets, one per subject, in the same order.
//
// ARGV, 1-based as Lua reads it:
//
//	[allowArgNow]      now in microseconds, or "" for Redis TIME (only tests pass a clock)
//	[allowArgTicket]   the request's ticket, recorded in every subject when admitted
//	[allowArgLease]    lease in microseconds: "0" records for good; > 0 reserves
//	                   (the ticket counts at once and also goes into each pending
//	                   set; settle.lua commits or releases it, and a reservation
//	                   older than the lease is removed by the next decision)
//	[allowArgSubjects] then two per subject (subjectArgs): its sets' time to live
//	                   in milliseconds (its longest window, rounded up), and its
//	                   windows as one string, "longest_us window_us max
//	                   window_us max ..."
//
// Two arguments a subject rather than one a number: Redis makes a Lua string
// of every argument, and a fresh subject (the common case) reads neither
// string, so each argument is a cost with nothing to show for it
// (docs/measurements/2026-11-27-limiter-hot-path.md). Every argument is a
// string the script passes on or parses, never a Lua number formatted back.
//
// An entry exactly window_us old is outside its window. The request is
// admitted only when every window holds fewer than max entries; a refusal
// writes nothing.
//
// The reply is allowReplyLen integers, at the allowReply* positions: see
// allowReply for what each means. A request admitted with every window
// empty (fresh subjects, the common case) gets only now, one integer: a
// list costs Redis some 6,000 instructions to send, more than a ZADD.
const (
	allowArgNow      = 1
	allowArgTicket   = 2
	allowArgLease    = 3
	allowArgSubjects = 4
)

// Positions in allow.lua's reply (0-based, as Go reads it).
const (
	allowReplyAllowed    = iota // 1 admitted, 0 refused
	allowReplyNow               // Redis's now, microseconds
	allowReplyTight             // 1-based window index over all windows in argument order; 0: every window was empty
	allowReplyUsed              // the tight window's count, this request included when admitted
	allowReplyReset             // refused: the exact wait until the request fits; admitted: until the tight window's oldest entry leaves
	allowReplyPending           // refused: other requests' reservations in the full windows
	allowReplyContention        // 1 when a refusal is owed only to reservations
	allowReplyLen
)

// allowArgs is allow.lua's (and status.lua's) ARGV.
type allowArgs struct {
	now      time.Time // zero: the script reads Redis TIME
	ticket   string
	lease    time.Duration // 0: record for good
	subjects []otp.Subject
}

// argv lays the arguments out at the allowArg* positions.
func (a allowArgs) argv() []any {
	argv := make([]any, 0, allowArgSubjects-1+2*len(a.subjects))
	var now, lease any = "", "0" // constants: no allocation
	if !a.now.IsZero() {
		now = strconv.FormatInt(a.now.UnixMicro(), 10)
	}
	if a.lease > 0 {
		lease = strconv.FormatInt(a.lease.Microseconds(), 10)
	}
	argv = append(argv, now, a.ticket, lease)
	for _, s := range a.subjects {
		sa := subjectArgsOf(s.Rules)
		argv = append(argv, sa.ttl, sa.windows)
	}
	return argv
}

// allowbatch.lua runs allow.lua for several decisions in one script call,
// when the batcher (redisbatch.Merge) holds several at once: Redis pays a
// call's fixed cost (the request, KEYS and ARGV, the interpreter, the
// reply), TIME and the arguments shared by every decision once for the
// lot. Each decision is still decided alone and atomically, in turn, and
// answered as allow.lua answers it.
//
// Its protocol: decisions may share a call when sameAllowShape says so:
// as many KEYS, and ARGV the same but for the ticket (the clock, the lease
// and every subject's windows). Then, for d decisions (allowBatchArgs):
//
//	KEYS  every decision's allow.lua KEYS in turn (d times as many)
//	ARGV  [1] d; [2...] allow.lua's ARGV of the first decision; then the
//	      tickets of the other d - 1, in order
//
// The reply is a list of d elements, each decision's allow.lua reply, or
// its error. With ARGV's now "" the decisions share one Redis TIME: they
// are decided in turn at one instant, each seeing those before it.
func sameAllowShape(a, b redisbatch.Call) bool {
	if len(a.Keys) != len(b.Keys) || len(a.Args) != len(b.Args) {
		return false
	}
	for i := range a.Args {
		if i != allowArgTicket-1 && a.Args[i] != b.Args[i] {
			return false
		}
	}
	return true
}

// allowBatchArgs is allowbatch.lua's KEYS and ARGV for calls of allow.lua
// that are all sameAllowShape.
func allowBatchArgs(calls []redisbatch.Call) ([]string, []any) {
	keys := make([]string, 0, len(calls)*len(calls[0].Keys))
	args := make([]any, 0, 1+len(calls[0].Args)+len(calls)-1)
	args = append(args, len(calls))
	args = append(args, calls[0].Args...)
	for _, c := range calls {
		keys = append(keys, c.Keys...)
	}
	for _, c := range calls[1:] {
		args = append(args, c.Args[allowArgTicket-1])
	}
	return keys, args
}

// allowReply is allow.lua's reply, read.
type allowReply struct {
	allowed    bool
	now        time.Time
	tight      int // 1-based window index; 0: every window was empty (the rules alone name the tightest)
	used       int
	reset      time.Duration
	pending    int64
	contention bool
}

// parseAllowReply reads allow.lua's reply to a call over windows windows.
func parseAllowReply(v any, windows int) (allowReply, error) {
	if now, ok := v.(int64); ok {
		// Admitted, every window empty.
		return allowReply{allowed: true, now: time.UnixMicro(now), used: 1}, nil
	}
	list, ok := v.([]any)
	if !ok || len(list) != allowReplyLen {
		return allowReply{}, fmt.Errorf("unexpected reply %v", v)
	}
	var vals [allowReplyLen]int64
	for i, x := range list {
		if vals[i], ok = x.(int64); !ok {
			return allowReply{}, fmt.Errorf("unexpected reply %v", v)
		}
	}
	if vals[allowReplyTight] < 0 || vals[allowReplyTight] > int64(windows) {
		return allowReply{}, fmt.Errorf("unexpected reply %v", v)
	}
	return allowReply{
		allowed:    vals[allowReplyAllowed] == 1,
		now:        time.UnixMicro(vals[allowReplyNow]),
		tight:      int(vals[allowReplyTight]),
		used:       int(vals[allowReplyUsed]),
		reset:      time.Duration(vals[allowReplyReset]) * time.Microsecond,
		pending:    vals[allowReplyPending],
		contention: vals[allowReplyContention] == 1,
	}, nil
}

func int64s(v any) ([]int64, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("not a list")
	}
	out := make([]int64, len(list))
	for i, x := range list {
		n, ok := x.(int64)
		if !ok {
			return nil, fmt.Errorf("not an integer")
		}
		out[i] = n
	}
	return out, nil
}
