package otp

import (
	"fmt"
	"strings"
	"sync/atomic"
)

// The client errors the flows answer with, built in one place so their
// messages and extra fields stay alike.

func unavailable(what string, err error) *Error {
	return &Error{Code: EUnavailable, Message: "the service is temporarily unavailable", Err: fmt.Errorf("%s: %w", what, err)}
}

// RateLimitedError is the client error for a refused decision.
func RateLimitedError(dec Decision) *Error {
	w := dec.Tightest
	if w.Scope == KeyScope {
		return &Error{
			Code: ERateLimited,
			Message: fmt.Sprintf("too many requests for this %s: at most %d per %s; retry in %d s",
				w.Name, w.Rule.Max, w.Rule.Label(), dec.RetryAfterSeconds()),
			Fields:     map[string]any{"scope": w.Scope, "key": w.Name, "window": w.Rule.Label(), "limit": w.Rule.Max},
			RetryAfter: dec.RetryAfterSeconds(),
		}
	}
	return &Error{
		Code: ERateLimited,
		Message: fmt.Sprintf("too many requests for this %s: at most %d per %s; retry in %d s",
			w.Scope, w.Rule.Max, w.Rule.Label(), dec.RetryAfterSeconds()),
		Fields: map[string]any{
			"scope":  w.Scope,
			"window": w.Rule.Label(),
			"limit":  w.Rule.Max,
		},
		RetryAfter: dec.RetryAfterSeconds(),
	}
}

// heldError is the refusal of a remembered decision, built once for each
// tightest window and wait in whole seconds (what RateLimitedError makes
// of a decision): a flood on one held subject is answered the same error,
// a message and a map each, for a second. Every caller gets the same
// *Error, which nobody changes.
type heldError struct {
	scope, name string
	rule        Rule
	retry       int64
	err         *Error
	reason      string // the decision's Reason
}

// heldErrors keeps a Service's last heldError.
type heldErrors struct{ last atomic.Pointer[heldError] }

// rateLimited is RateLimitedError(dec) and dec.Reason(), shared with the
// other requests refused by the same window in the same second.
func (e *heldErrors) rateLimited(dec Decision) (*Error, string) {
	w, retry := dec.Tightest, dec.RetryAfterSeconds()
	if h := e.last.Load(); h != nil && h.retry == retry && h.rule == w.Rule && h.scope == w.Scope && h.name == w.Name {
		return h.err, h.reason
	}
	h := &heldError{scope: w.Scope, name: w.Name, rule: w.Rule, retry: retry, err: RateLimitedError(dec), reason: dec.Reason()}
	e.last.Store(h)
	return h.err, h.reason
}

func providerError(err error) *Error {
	return &Error{Code: EProviderError, Message: "the SMS provider did not accept the text", Err: err}
}

func invalidCode(left int) *Error {
	msg := fmt.Sprintf("the code is wrong; %d attempts left", left)
	switch left {
	case 0:
		msg = "the code is wrong and that was the last attempt; request a new code"
	case 1:
		msg = "the code is wrong; 1 attempt left"
	}
	return &Error{Code: EInvalidCode, Message: msg, Fields: map[string]any{"attempts_left": left}}
}

func noPendingCode() *Error {
	return Errorf(ENoPendingCode, "no code is pending for this phone: it was never sent, has expired, was used or too many wrong codes were tried")
}

// notAllowed is the client error for a number the policy refuses.
func notAllowed(reason string) *Error {
	msg := "numbers of this country cannot receive codes here"
	if t, ok := strings.CutPrefix(reason, "type:"); ok {
		msg = fmt.Sprintf("%s numbers cannot receive codes here", strings.ReplaceAll(t, "_", " "))
	}
	return &Error{Code: EPhoneNotAllowed, Message: msg, Fields: map[string]any{"reason": reason}}
}
