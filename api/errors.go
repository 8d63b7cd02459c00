package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"

	"github.com/labstack/echo/v4"

	"smsgw/otp"
)

// statusOf is the one table from error codes to HTTP statuses.
var statusOf = map[string]int{
	otp.EInvalidRequest:       http.StatusBadRequest,
	otp.EInvalidPhone:         http.StatusBadRequest,
	otp.EUnauthorized:         http.StatusUnauthorized,
	otp.ENotFound:             http.StatusNotFound,
	otp.ENoPendingCode:        http.StatusNotFound,
	otp.EMethodNotAllowed:     http.StatusMethodNotAllowed,
	otp.EForbidden:            http.StatusForbidden,
	otp.EChallengeRequired:    http.StatusForbidden,
	otp.ERequestInProgress:    http.StatusConflict,
	otp.ENotPending:           http.StatusConflict,
	otp.ERequestTooLarge:      http.StatusRequestEntityTooLarge,
	otp.EUnsupportedMediaType: http.StatusUnsupportedMediaType,
	otp.EPhoneNotAllowed:      http.StatusUnprocessableEntity,
	otp.EInvalidCode:          http.StatusUnprocessableEntity,
	otp.ERateLimited:          http.StatusTooManyRequests,
	otp.EInternal:             http.StatusInternalServerError,
	otp.EProviderError:        http.StatusBadGateway,
	otp.EUnavailable:          http.StatusServiceUnavailable,
}

// StatusOf returns the HTTP status for an error code.
func StatusOf(code string) int {
	if s, ok := statusOf[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// errorBody encodes the one error envelope: {"error": {"code", "message",
// ...extra}}, members sorted by name as encoding/json orders a map's, and a
// newline after it as Echo's JSON has. Written by hand because every refused
// request answers one: a map and reflection cost the refused path ~7% of its
// CPU (make bench-http).
func errorBody(e *otp.Error) []byte {
	names := make([]string, 0, 3+len(e.Fields))
	for k := range e.Fields {
		if k != "code" && k != "message" && (k != "retry_after" || e.Code != otp.ERateLimited) {
			names = append(names, k)
		}
	}
	names = append(names, "code", "message")
	if e.Code == otp.ERateLimited {
		names = append(names, "retry_after")
	}
	slices.Sort(names)
	b := make([]byte, 0, 256)
	b = append(b, `{"error":{`...)
	for i, k := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSON(b, k)
		b = append(b, ':')
		switch {
		case k == "code":
			b = appendJSON(b, e.Code)
		case k == "message":
			b = appendJSON(b, e.Message)
		case k == "retry_after" && e.Code == otp.ERateLimited:
			b = strconv.AppendInt(b, e.RetryAfter, 10)
		default:
			b = appendJSON(b, e.Fields[k])
		}
	}
	return append(b, "}}\n"...)
}

// appendJSON appends v as encoding/json writes it (HTML escaped), with a
// fast path for the strings and integers errors carry.
func appendJSON(b []byte, v any) []byte {
	switch v := v.(type) {
	case int:
		return strconv.AppendInt(b, int64(v), 10)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case string:
		if plainJSON(v) {
			b = append(b, '"')
			b = append(b, v...)
			return append(b, '"')
		}
	}
	out, err := json.Marshal(v)
	if err != nil {
		return append(b, "null"...)
	}
	return append(b, out...)
}

// plainJSON reports whether s needs no escaping in a JSON string, HTML
// escaping included.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// asClientError turns any error into the *otp.Error the client sees. Echo's
// own errors (unknown route, wrong method) get codes too; anything unknown is
// internal and its cause stays in the log.
func asClientError(err error) *otp.Error {
	if e, ok := errors.AsType[*otp.Error](err); ok {
		if e.Code == otp.EInternal || e.Message == "" {
			return &otp.Error{Code: e.Code, Message: "internal error", Err: e}
		}
		return e
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return otp.Errorf(otp.ENotFound, "no such endpoint")
		case http.StatusMethodNotAllowed:
			return otp.Errorf(otp.EMethodNotAllowed, "method not allowed on this endpoint")
		case http.StatusRequestEntityTooLarge:
			return otp.Errorf(otp.ERequestTooLarge, "request body is larger than %d bytes", maxBody)
		case http.StatusUnsupportedMediaType:
			return otp.Errorf(otp.EUnsupportedMediaType, "Content-Type must be application/json")
		case http.StatusBadRequest:
			return otp.Errorf(otp.EInvalidRequest, "bad request")
		}
	}
	return &otp.Error{Code: otp.EInternal, Message: "internal error", Err: err}
}

// answerError answers every error in the envelope, with Retry-After on a
// rate_limited one. Internal errors and failing dependencies are logged;
// client errors are not errors of ours.
func (s *Server) answerError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	e := asClientError(err)
	status := StatusOf(e.Code)
	ctx := c.Request().Context()
	attrs := []any{"method", c.Request().Method, "path", c.Path(), "code", e.Code}
	switch {
	case status == http.StatusInternalServerError:
		s.log.ErrorContext(ctx, "internal error", append(attrs, "err", err)...)
	case status >= 500:
		s.log.WarnContext(ctx, "dependency failed", append(attrs, "err", err)...)
	default:
		s.log.DebugContext(ctx, "client error", attrs...)
	}
	if e.Code == otp.ERateLimited {
		c.Response().Header().Set("Retry-After", strconv.FormatInt(e.RetryAfter, 10))
	}
	if c.Request().Method == http.MethodHead {
		err = c.NoContent(status)
	} else {
		err = c.JSONBlob(status, errorBody(e))
	}
	if err != nil {
		s.log.DebugContext(ctx, "error response not written", "err", err)
	}
}
