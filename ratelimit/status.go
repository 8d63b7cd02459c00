package ratelimit

import (
	"context"
	"fmt"
	"time"

	"smsgw/otp"
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

// Status reads every window of the subjects on Redis's clock, changing
// nothing (on Cluster, one script per slot).
func (l *Limiter) Status(ctx context.Context, subjects []otp.Subject) ([]otp.Window, error) {
	var windows []otp.Window
	for _, group := range l.slots(subjects) {
		ws := PoliciesOf(group)
		v, err := statusScript.Run(ctx, l.rdb, l.allowKeys(group, false), l.allowArgs("", 0, group).argv()...).Result()
		if err != nil {
			return nil, fmt.Errorf("ratelimit: status: %w", err)
		}
		states, err := parseStatusReply(v, len(ws))
		if err != nil {
			return nil, fmt.Errorf("ratelimit: status: %w", err)
		}
		for i, st := range states {
			ws[i].Used, ws[i].Reset = st.used, st.reset
		}
		windows = append(windows, ws...)
	}
	return inSubjectOrder(subjects, l.slots(subjects), windows), nil
}

// inSubjectOrder puts windows read group by group back in subject order.
func inSubjectOrder(subjects []otp.Subject, groups [][]otp.Subject, windows []otp.Window) []otp.Window {
	if len(groups) <= 1 {
		return windows
	}
	byKey := make(map[string][]otp.Window, len(subjects))
	i := 0
	for _, g := range groups {
		for _, s := range g {
			byKey[s.Key] = windows[i : i+len(s.Rules)]
			i += len(s.Rules)
		}
	}
	out := make([]otp.Window, 0, len(windows))
	for _, s := range subjects {
		out = append(out, byKey[s.Key]...)
	}
	return out
}
