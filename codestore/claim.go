package codestore

import (
	"fmt"
	"strings"
	"time"

	"smsgw/otp"
)

// The protocol of claim.lua, which claims an idempotency scope for a
// request, or reports who has it.
//
// KEYS[1] is the scope's key, holding claimValuePrefix+ticket while claimed
// and doneValuePrefix+answer once settled; KEYS[2], when given, counts the
// requests that found the claim held (duplicates.go). ARGV is claimArgs.argv(): the
// claiming request's ticket, how long the claim (and later the answer) is
// kept in milliseconds. The reply is {state, answer} with state a
// claimState: parseClaimReply.
type claimArgs struct {
	ticket string
	ttl    time.Duration
}

func (a claimArgs) argv() []any { arr := a.argvArray(); return arr[:] }

// argvArray is argv in an array, for a caller that makes it part of its own
// allocation.
func (a claimArgs) argvArray() [2]any { return [2]any{a.ticket, ms(a.ttl)} }

// The prefixes of a scope key's value, as the scripts write them.
const (
	claimValuePrefix = "claim:"
	doneValuePrefix  = "done:"
)

// claimState is claim.lua's first reply integer.
type claimState int64

const (
	claimTaken claimState = 1 // claimed for this request (also when it held it already)
	claimHeld  claimState = 2 // another request holds the claim
	claimDone  claimState = 3 // the scope has its answer
)

// parseClaimReply reads claim.lua's {state, answer}.
func parseClaimReply(v []any) (otp.Claim, []byte, error) {
	if len(v) != 2 {
		return 0, nil, fmt.Errorf("unexpected reply %v", v)
	}
	state, _ := v[0].(int64)
	answer, _ := v[1].(string)
	switch claimState(state) {
	case claimTaken:
		return otp.Claimed, nil, nil
	case claimHeld:
		return otp.ClaimBusy, nil, nil
	case claimDone:
		return otp.ClaimDone, []byte(strings.TrimPrefix(answer, doneValuePrefix)), nil
	}
	return 0, nil, fmt.Errorf("unexpected reply %v", v)
}
