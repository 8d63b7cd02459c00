// Package otp is the domain of smsgw: phone numbers, limits, codes and the
// send and verify flows. It defines the small interfaces it needs; the
// packages named after what they wrap (ratelimit, audit, sender/...) implement
// them, and api exposes them over HTTP.
package otp

import (
	"errors"
	"fmt"
)

// Error codes are part of the API contract (SPEC.md): clients switch on them,
// so they never change once shipped. The HTTP status for each lives in api/.
const (
	EInvalidRequest       = "invalid_request"
	EUnsupportedMediaType = "unsupported_media_type"
	ERequestTooLarge      = "request_too_large"
	EInvalidPhone         = "invalid_phone"
	EPhoneNotAllowed      = "phone_not_allowed"
	ERateLimited          = "rate_limited"
	EProviderError        = "provider_error"
	EUnavailable          = "unavailable"
	EInvalidCode          = "invalid_code"
	ENoPendingCode        = "no_pending_code"
	EUnauthorized         = "unauthorized"
	ENotFound             = "not_found"
	EMethodNotAllowed     = "method_not_allowed"
	EForbidden            = "forbidden"
	ERequestInProgress    = "request_in_progress"
	EChallengeRequired    = "challenge_required"
	EInternal             = "internal"
)

// Error is the one error type that crosses from the domain to the API. Message
// is shown to clients; Err is the cause, kept for logs and never shown.
type Error struct {
	Code    string
	Message string
	// Fields are extra members of the error envelope, e.g. scope.
	Fields map[string]any
	// RetryAfter is, on a rate_limited error, the whole seconds until the
	// same request would be admitted: the envelope's retry_after and the
	// Retry-After header.
	RetryAfter int64
	Err        error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return e.Code + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns a client-facing error with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err, or EInternal for anything that is not an
// *Error: unknown failures are internal by definition.
func ErrorCode(err error) string {
	// AsType, not As: As's target escapes, an allocation on every call,
	// and every answered request asks (the refused path three times).
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code
	}
	return EInternal
}
