package ratelimit

import (
	"fmt"
	"time"
)

// The protocol of status.lua, which reads every window of every subject,
// writing nothing (the support desk's view). KEYS holds the subjects' sorted
// sets only; ARGV is allowArgs (its ticket, lease and times to live unused).
//
// The reply is Redis's now in microseconds, then one (used, reset_us) pair
// per window in argument order, from statusReplyWindows on: reset_us is how
// long until the window gives back quota (until one more request fits when
// it is full, until its oldest entry leaves otherwise, 0 when it is empty).
const (
	statusReplyNow     = 0
	statusReplyWindows = 1
)

// windowState is one window as status.lua reads it.
type windowState struct {
	used  int
	reset time.Duration
}

// parseStatusReply reads status.lua's reply to a call over windows windows.
func parseStatusReply(v any, windows int) ([]windowState, error) {
	vals, err := int64s(v)
	if err != nil || len(vals) != statusReplyWindows+2*windows {
		return nil, fmt.Errorf("unexpected reply %v", v)
	}
	out := make([]windowState, windows)
	for i := range out {
		at := statusReplyWindows + 2*i
		out[i] = windowState{used: int(vals[at]), reset: time.Duration(vals[at+1]) * time.Microsecond}
	}
	return out, nil
}
