package client

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Error codes of smsgw's envelope that this package maps to types (docs/api.md).
const (
	CodeRateLimited       = "rate_limited"
	CodeInvalidCode       = "invalid_code"
	CodeNoPendingCode     = "no_pending_code"
	CodePhoneNotAllowed   = "phone_not_allowed"
	CodeChallengeRequired = "challenge_required"
	CodeUnavailable       = "unavailable"
	CodeNotFound          = "not_found"
	CodeNotPending        = "not_pending"
)

// APIError is an answer other than 2xx: smsgw's envelope {"error": {"code",
// "message", ...}} when it has one. Code is "" when the answer was not
// smsgw's (a proxy's page, say); Message then says what came instead.
type APIError struct {
	StatusCode int
	Code       string
	Message    string // written for people: a backend may show it
	RequestID  string // the answer's X-Request-ID, to quote to support
	// Fields holds the envelope's other members ("scope", "retry_after", ...).
	Fields map[string]json.RawMessage
}

func (e *APIError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("smsgw: HTTP %d: %s", e.StatusCode, e.Message)
	}
	return fmt.Sprintf("smsgw: %d %s: %s", e.StatusCode, e.Code, e.Message)
}

// field decodes the envelope's member name into v, leaving v as it is when
// the member is missing or of another type.
func (e *APIError) field(name string, v any) {
	if raw, ok := e.Fields[name]; ok {
		_ = json.Unmarshal(raw, v)
	}
}

// RateLimited is 429 rate_limited: a window, a caller-defined limit key or
// a pumping rule is full. Nothing was texted or counted.
type RateLimited struct {
	*APIError
	// RetryAfter is when this same request would be admitted: the body's
	// retry_after, else the Retry-After header; 0 when the answer had neither.
	RetryAfter time.Duration
	Scope      string  // "phone", "ip", "key", "range", "country", ...
	Key        string  // with Scope "key": the limit key's name (e.g. "user_id")
	Window     string  // e.g. "1m"
	Rule       string  // a pumping rule's name (e.g. "range_1k"), if one refused
	Limit      float64 // the window's max or the rule's budget
}

// InvalidCode is 422 invalid_code: a wrong code. AttemptsLeft 0 means the
// code is gone (a new send is needed); -1 that the answer did not say.
type InvalidCode struct {
	*APIError
	AttemptsLeft int
}

// NoPendingCode is 404 no_pending_code: never sent, expired, used, canceled
// or locked out.
type NoPendingCode struct{ *APIError }

// PhoneNotAllowed is 422 phone_not_allowed: the number's type or country is
// refused by policy, or an operator blocked it. Reason is e.g.
// "type:premium_rate", "country:XK" or "override:block".
type PhoneNotAllowed struct {
	*APIError
	Reason string
}

// ChallengeRequired is 403 challenge_required: a pumping rule would refuse
// this send; the person solves the bot challenge named here and the send is
// made again with its token as SendRequest.ChallengeToken.
type ChallengeRequired struct {
	*APIError
	Provider string // "turnstile", "hcaptcha", "recaptcha"
	SiteKey  string
	Scope    string
	Rule     string
}

// NotFound is 404 not_found: an unknown verification, or another key's.
type NotFound struct{ *APIError }

// NotPending is 409 not_pending: the verification can no longer be
// canceled; Status says what became of it ("approved", "expired", ...).
type NotPending struct {
	*APIError
	Status string
}

// Unavailable is smsgw unable to decide (503: Redis or the audit store
// unreachable, nothing texted), or smsgw not reached at all. APIError is nil
// when no answer came; Err then is why.
type Unavailable struct {
	*APIError
	Err error

	retryAfter time.Duration // what the answer asked to wait (retryAfterOf)
}

func (e *Unavailable) Error() string {
	if e.APIError != nil {
		return e.APIError.Error()
	}
	return "smsgw: unavailable: " + e.Err.Error()
}

// Unwrap gives errors.As the *APIError (when smsgw answered) and the
// transport's error (when it did not).
func (e *Unavailable) Unwrap() []error {
	var out []error
	if e.APIError != nil {
		out = append(out, e.APIError)
	}
	if e.Err != nil {
		out = append(out, e.Err)
	}
	return out
}

// Unwrap lets errors.As find the *APIError behind each typed error.
func (e *RateLimited) Unwrap() error       { return e.APIError }
func (e *InvalidCode) Unwrap() error       { return e.APIError }
func (e *NoPendingCode) Unwrap() error     { return e.APIError }
func (e *PhoneNotAllowed) Unwrap() error   { return e.APIError }
func (e *ChallengeRequired) Unwrap() error { return e.APIError }
func (e *NotFound) Unwrap() error          { return e.APIError }
func (e *NotPending) Unwrap() error        { return e.APIError }

// ProtocolError is a 2xx answer that is not what the contract promises
// (not JSON, a required member missing, too large).
type ProtocolError struct {
	StatusCode int
	Err        error
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("smsgw: a %d answer that is not the contract's: %v", e.StatusCode, e.Err)
}

func (e *ProtocolError) Unwrap() error { return e.Err }

// decodeError turns an answer other than 2xx into its typed error.
func decodeError(status int, h http.Header, body []byte) error {
	base := &APIError{StatusCode: status, RequestID: h.Get("X-Request-ID")}
	var env struct {
		Error map[string]json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &env) == nil && env.Error != nil {
		_ = json.Unmarshal(env.Error["code"], &base.Code)
		_ = json.Unmarshal(env.Error["message"], &base.Message)
		delete(env.Error, "code")
		delete(env.Error, "message")
		base.Fields = env.Error
	}
	if base.Code == "" {
		base.Message = fmt.Sprintf("%s, not smsgw's error envelope (%s)", http.StatusText(status), snippet(body))
	}
	switch {
	case base.Code == CodeRateLimited:
		e := &RateLimited{APIError: base, RetryAfter: retryAfterOf(base, h, time.Now())}
		base.field("scope", &e.Scope)
		base.field("key", &e.Key)
		base.field("window", &e.Window)
		base.field("rule", &e.Rule)
		base.field("limit", &e.Limit)
		return e
	case base.Code == CodeInvalidCode:
		e := &InvalidCode{APIError: base, AttemptsLeft: -1}
		base.field("attempts_left", &e.AttemptsLeft)
		return e
	case base.Code == CodeNoPendingCode:
		return &NoPendingCode{base}
	case base.Code == CodePhoneNotAllowed:
		e := &PhoneNotAllowed{APIError: base}
		base.field("reason", &e.Reason)
		return e
	case base.Code == CodeChallengeRequired:
		e := &ChallengeRequired{APIError: base}
		var ch struct {
			Provider string `json:"provider"`
			SiteKey  string `json:"site_key"`
		}
		base.field("challenge", &ch)
		e.Provider, e.SiteKey = ch.Provider, ch.SiteKey
		base.field("scope", &e.Scope)
		base.field("rule", &e.Rule)
		return e
	case base.Code == CodeNotFound:
		return &NotFound{base}
	case base.Code == CodeNotPending:
		e := &NotPending{APIError: base}
		base.field("status", &e.Status)
		return e
	case base.Code == CodeUnavailable || status == http.StatusServiceUnavailable:
		return &Unavailable{APIError: base, retryAfter: retryAfterOf(base, h, time.Now())}
	}
	return base
}

// snippet quotes the start of a body that is not smsgw's, escaped so that
// nothing hostile reaches a log.
func snippet(body []byte) string {
	if len(body) == 0 {
		return "an empty body"
	}
	const n = 120
	if len(body) > n {
		return strconv.Quote(string(body[:n])) + "…"
	}
	return strconv.Quote(string(body))
}

// maxRetryAfter (seconds, about 68 years) bounds what is believed of a
// hostile answer, so no duration overflows.
const maxRetryAfter = 1 << 31

// retryAfterOf is how long an answer asks to wait before the same request:
// its body's retry_after (seconds, fractions kept) when that is more than 0
// and at most maxRetryAfter, else its Retry-After header (retryAfter), else
// 0. A 429's RateLimited.RetryAfter and the wait before retrying a 503 are
// both read here, so they cannot disagree.
func retryAfterOf(e *APIError, h http.Header, now time.Time) time.Duration {
	var secs float64
	if e != nil {
		e.field("retry_after", &secs)
	}
	if secs > 0 && secs <= maxRetryAfter {
		return time.Duration(secs * float64(time.Second))
	}
	return retryAfter(h, now)
}

// retryAfter reads a Retry-After header (seconds, or an HTTP date); 0 when
// there is none or it does not parse.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 || s > maxRetryAfter {
			return 0
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
