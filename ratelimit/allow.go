package ratelimit

import (
	"fmt"
	"time"

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
//	[allowArgLease]    lease in microseconds: 0 records for good; > 0 reserves
//	                   (the ticket counts at once and also goes into each pending
//	                   set; settle.lua commits or releases it, and a reservation
//	                   older than the lease is removed by the next decision)
//	[allowArgSubjects] then per subject: n, its longest window_us, then n pairs
//	                   (window_us, max)
//
// An entry exactly window_us old is outside its window. The request is
// admitted only when every window holds fewer than max entries; a refusal
// writes nothing.
//
// The reply is allowReplyLen integers, at the allowReply* positions: see
// allowReply for what each means.
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
	argv := make([]any, 0, allowArgSubjects-1+2*len(a.subjects)+2*windowCount(a.subjects))
	if a.now.IsZero() {
		argv = append(argv, "")
	} else {
		argv = append(argv, a.now.UnixMicro())
	}
	argv = append(argv, a.ticket, a.lease.Microseconds())
	for _, s := range a.subjects {
		var longest time.Duration
		for _, r := range s.Rules {
			longest = max(longest, r.Window)
		}
		argv = append(argv, len(s.Rules), longest.Microseconds())
		for _, r := range s.Rules {
			argv = append(argv, r.Window.Microseconds(), r.Max)
		}
	}
	return argv
}

// windowCount is how many windows the subjects have: the scripts number
// them 1..windowCount in argument order.
func windowCount(subjects []otp.Subject) int {
	n := 0
	for _, s := range subjects {
		n += len(s.Rules)
	}
	return n
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
	vals, err := int64s(v)
	if err != nil || len(vals) != allowReplyLen || vals[allowReplyTight] < 0 || vals[allowReplyTight] > int64(windows) {
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
