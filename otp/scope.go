package otp

import "strings"

// sendScopePrefix starts a send's idempotency scope: "send\x00<E.164>\x00<key>".
const sendScopePrefix = "send\x00"

// SendScope is the idempotency scope of a send to e164 with the client's
// Idempotency-Key: a key is the client's own for one number.
func SendScope(e164, key string) string { return sendScopePrefix + e164 + "\x00" + key }

// ScopeNumber is the E.164 number of a send's scope, "" for a scope of
// another form.
func ScopeNumber(scope string) string {
	rest, ok := strings.CutPrefix(scope, sendScopePrefix)
	if !ok {
		return ""
	}
	e164, _, ok := strings.Cut(rest, "\x00")
	if !ok {
		return ""
	}
	return e164
}

// ScopeSubject is the key of the subject a scope's claim is stored with:
// the number's per-phone windows (SendPhoneKey+E.164), so that on a Redis
// Cluster the claim shares their hash slot and one script claims and
// counts; "" for a scope of another form.
func ScopeSubject(scope string) string {
	if e164 := ScopeNumber(scope); e164 != "" {
		return SendPhoneKey + e164
	}
	return ""
}
