package ratelimit

import "fmt"

// The protocol of settle.lua, which commits or releases a reservation that
// allow.lua made with a lease, on one slot.
//
// KEYS: the subjects' sorted sets, then their pending sets (as allow.lua with
// a lease). ARGV: [1] the ticket, [2] a settleMode. The reply is one integer:
// how many subjects still held the reservation; on commit, fewer than all
// means a lease ran out and the decision must not stand.
type settleArgs struct {
	ticket string
	mode   settleMode
}

// settleMode is what settle.lua does with a reservation.
type settleMode string

const (
	settleCommit  settleMode = "commit"  // it stays counted for good
	settleRelease settleMode = "release" // it is taken back
)

func (a settleArgs) argv() []any { return []any{a.ticket, string(a.mode)} }

// parseSettleReply reads settle.lua's reply: the subjects that held the
// reservation.
func parseSettleReply(v any) (int64, error) {
	held, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("unexpected reply %v", v)
	}
	return held, nil
}
