package api

import (
	"errors"
	"net/http"
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

// errorBody builds the one error envelope: {"error": {"code", "message", ...extra}}.
func errorBody(e *otp.Error) map[string]any {
	inner := make(map[string]any, 3+len(e.Fields))
	for k, v := range e.Fields {
		inner[k] = v
	}
	inner["code"] = e.Code
	inner["message"] = e.Message
	if e.Code == otp.ERateLimited {
		inner["retry_after"] = e.RetryAfter
	}
	return map[string]any{"error": inner}
}

// asClientError turns any error into the *otp.Error the client sees. Echo's
// own errors (unknown route, wrong method) get codes too; anything unknown is
// internal and its cause stays in the log.
func asClientError(err error) *otp.Error {
	var e *otp.Error
	if errors.As(err, &e) {
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
		err = c.JSON(status, errorBody(e))
	}
	if err != nil {
		s.log.DebugContext(ctx, "write error response", "err", err)
	}
}
