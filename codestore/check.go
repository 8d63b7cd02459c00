package codestore

import (
	"fmt"

	"smsgw/otp"
)

// The protocol of check.lua, which compares a guess with the pending code,
// counts and consumes, atomically.
//
// KEYS[1] is the phone's code hash (codeField*). ARGV is checkArgs.argv():
// the guess's MAC and max_attempts. The reply is {status, attempts_left}
// with status a checkStatus: parseCheckReply.
type checkArgs struct {
	mac         []byte
	maxAttempts int
}

func (a checkArgs) argv() []any { return []any{a.mac, a.maxAttempts} }

// checkStatus is check.lua's first reply integer.
type checkStatus int64

const (
	checkNone     checkStatus = 0 // nothing pending
	checkApproved checkStatus = 1 // the guess matched; the code is gone
	checkWrong    checkStatus = 2 // missed; the code is gone when attempts_left is 0
)

// outcome is the domain's name for the status.
func (s checkStatus) outcome() (otp.CodeCheck, bool) {
	switch s {
	case checkNone:
		return otp.CodeNone, true
	case checkApproved:
		return otp.CodeApproved, true
	case checkWrong:
		return otp.CodeWrong, true
	}
	return otp.CodeNone, false
}

// parseCheckReply reads check.lua's {status, attempts_left}.
func parseCheckReply(v any) (otp.CodeCheck, int, error) {
	list, ok := v.([]any)
	if !ok || len(list) != 2 {
		return otp.CodeNone, 0, fmt.Errorf("unexpected reply %v", v)
	}
	status, ok1 := list[0].(int64)
	left, ok2 := list[1].(int64)
	outcome, known := checkStatus(status).outcome()
	if !ok1 || !ok2 || !known {
		return otp.CodeNone, 0, fmt.Errorf("unexpected reply %v", v)
	}
	return outcome, int(left), nil
}
