package codestore

import (
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/otp"
)

// The protocol of issue.lua, which stores a new pending code unless one is
// pending, atomically.
//
// KEYS[1] is the phone's code hash, with the fields codeField*. ARGV is
// issueArgs.argv(): the MAC, the sealed code, the time to live in
// milliseconds. The reply is the pending code's sealed form (its expiry
// renewed, its attempts kept), or nil when the new code was stored:
// parseIssueReply.
type issueArgs struct {
	code otp.StoredCode
	ttl  time.Duration
}

// The fields of a phone's code hash, as the scripts name them.
const (
	codeFieldMAC      = "m" // the code's MAC, which a guess's must equal
	codeFieldSealed   = "s" // the code sealed for the resend that reuses it
	codeFieldAttempts = "a" // wrong guesses so far
)

func (a issueArgs) argv() []any { arr := a.argvArray(); return arr[:] }

// argvArray is argv in an array, for a caller that makes it part of its own
// allocation.
func (a issueArgs) argvArray() [3]any { return [3]any{a.code.MAC, a.code.Sealed, ms(a.ttl)} }

// parseIssueReply returns the pending code's sealed form, or nil when the
// new code was stored (the script's false reads as redis.Nil).
func parseIssueReply(cmd *redis.Cmd) ([]byte, error) {
	v, err := cmd.Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseIssueValue(v)
}

// parseIssueValue reads issue.lua's reply as a value (nil: the script's
// false, as an element of a composed script's reply).
func parseIssueValue(v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	sealed, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("unexpected reply %v", v)
	}
	return []byte(sealed), nil
}

// ms is a duration as the scripts take it: whole milliseconds, at least 1.
func ms(d time.Duration) int64 { return max(int64(d/time.Millisecond), 1) }
