package codestore

import (
	"fmt"
	"time"

	"smsgw/internal/luascript"
	"smsgw/otp"
)

// IssueLua and ClaimLua are issue.lua and claim.lua, for a script that runs
// them inside its own with a send's other parts (package admission).
func IssueLua() string { return luascript.Source(luaFiles, "issue.lua") }
func ClaimLua() string { return luascript.Source(luaFiles, "claim.lua") }

// ClaimStops is, as a Lua expression over claim.lua's reply r, whether it
// ends a composed send: the scope is not this request's (busy or done).
const ClaimStops = "r[1] ~= 1"

// IssueCall is Issue's issue.lua call: what Issue stores, Check reads.
// Its key and arguments are made in one allocation (besides the key and
// the boxed arguments themselves).
func (s *Store) IssueCall(phone string, c otp.StoredCode, ttl time.Duration) (keys []string, args []any) {
	call := &struct {
		keys [1]string
		args [3]any
	}{keys: [1]string{s.key(phone)}, args: issueArgs{c, ttl}.argvArray()}
	return call.keys[:], call.args[:]
}

// ReadIssue reads issue.lua's reply as Issue returns it: the pending code's
// sealed form, or nil when the new code was stored.
func ReadIssue(v any) ([]byte, error) {
	sealed, err := parseIssueValue(v)
	if err != nil {
		return nil, fmt.Errorf("codes: issue: %w", err)
	}
	return sealed, nil
}

// ClaimCall is Claim's claim.lua call: what it claims, Settle settles.
func (s *Idempotency) ClaimCall(scope, ticket string, ttl time.Duration) (keys []string, args []any) {
	call := &struct {
		keys [1]string
		args [2]any
	}{keys: [1]string{s.key(scope)}, args: claimArgs{ticket, ttl}.argvArray()}
	return call.keys[:], call.args[:]
}

// ReadClaim reads claim.lua's reply as Claim returns it.
func ReadClaim(v any) (otp.Claim, []byte, error) {
	list, ok := v.([]any)
	if !ok {
		return 0, nil, fmt.Errorf("idempotency: claim: unexpected reply %v", v)
	}
	claim, answer, err := parseClaimReply(list)
	if err != nil {
		return 0, nil, fmt.Errorf("idempotency: claim: %w", err)
	}
	return claim, answer, nil
}
