package ratelimit

import (
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"smsgw/otp"
)

// subjectArgs is one subject's part of allow.lua's ARGV (allow.go), made
// from its rules. Both are strings already in interfaces, so a decision
// appends them to its ARGV without an allocation.
type subjectArgs struct {
	rules   []otp.Rule // a copy, to compare with
	ttl     any        // its sets' time to live, ms: the longest window, rounded up
	windows any        // "longest_us window_us max window_us max ..."
}

func newSubjectArgs(rules []otp.Rule) subjectArgs {
	var longest time.Duration
	for _, r := range rules {
		longest = max(longest, r.Window)
	}
	w := strconv.AppendInt(nil, longest.Microseconds(), 10)
	for _, r := range rules {
		w = append(w, ' ')
		w = strconv.AppendInt(w, r.Window.Microseconds(), 10)
		w = append(w, ' ')
		w = strconv.AppendInt(w, int64(r.Max), 10)
	}
	ttl := (longest + time.Millisecond - 1) / time.Millisecond
	return subjectArgs{rules: slices.Clone(rules), ttl: strconv.FormatInt(int64(ttl), 10), windows: string(w)}
}

// knownSubjectArgs are the subjectArgs made so far, shared read-only: a
// service has a handful of rule lists (the address's, the phone's, each
// limit key's), each used on every decision.
var knownSubjectArgs atomic.Pointer[[]subjectArgs]

// maxKnownSubjectArgs bounds knownSubjectArgs; lists beyond it are made
// every time.
const maxKnownSubjectArgs = 32

// subjectArgsOf is newSubjectArgs(rules), made once per list of rules.
func subjectArgsOf(rules []otp.Rule) subjectArgs {
	known := knownSubjectArgs.Load()
	if known != nil {
		for _, k := range *known {
			if slices.Equal(k.rules, rules) {
				return k
			}
		}
	}
	a := newSubjectArgs(rules)
	if known == nil || len(*known) < maxKnownSubjectArgs {
		var next []subjectArgs
		if known != nil {
			next = slices.Clone(*known)
		}
		next = append(next, a)
		knownSubjectArgs.CompareAndSwap(known, &next) // a lost race only costs a later miss
	}
	return a
}
