package api

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"smsgw/otp"
)

// clientIPKey is the request context's key of its client address. The
// context, not Echo's store, carries it: the store is a map made afresh for
// each request (a third of a kilobyte on every refused request).
type clientIPKey struct{}

// requestID is the X-Request-ID this request is answered with.
func requestID(c echo.Context) string { return otp.RequestID(c.Request().Context()) }

// clientIP is the request's client address (see ClientIPs).
func clientIP(c echo.Context) netip.Addr {
	a, _ := c.Request().Context().Value(clientIPKey{}).(netip.Addr)
	return a
}

// validRequestID accepts the ids tracing systems send (UUIDs, ULIDs, W3C
// trace ids, "svc-1234") and nothing that could smuggle text into logs.
func validRequestID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':' || c == '/' || c == '+' || c == '=') {
			return false
		}
	}
	return true
}

// withRequestContext gives every request its X-Request-ID (echoing a valid
// incoming one), in its context for every log line, and its client address,
// before anything can fail.
func (s *Server) withRequestContext(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		id := r.Header.Get(echo.HeaderXRequestID)
		if !validRequestID(id) {
			id = newID()
		}
		ctx := context.WithValue(otp.WithRequestID(r.Context(), id), clientIPKey{}, s.ips.Resolve(r))
		c.SetRequest(r.WithContext(ctx))
		c.Response().Header().Set(echo.HeaderXRequestID, id)
		return next(c)
	}
}

// observe counts and times requests per route, and logs each at debug level.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err) // write the envelope now, so the status is known
		}
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		status := c.Response().Status
		elapsed := time.Since(start)
		s.m.requests.WithLabelValues(route, statusLabel(status)).Inc()
		s.m.duration.WithLabelValues(route).Observe(elapsed.Seconds())
		if ctx := c.Request().Context(); s.log.Enabled(ctx, slog.LevelDebug) {
			s.log.DebugContext(ctx, "request", "method", c.Request().Method, "route", route,
				"status", status, "duration", elapsed, "client_ip", clientIP(c))
		}
		return nil
	}
}

// recoverPanics turns a panicking handler into a logged 500.
func (s *Server) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r) // net/http drops the connection quietly
				}
				s.log.ErrorContext(c.Request().Context(), "panic in handler", "panic", r)
				err = echo.NewHTTPError(http.StatusInternalServerError)
			}
		}()
		return next(c)
	}
}

// statusLabels are the metrics' labels of the statuses 100 to 599, made
// once: strconv.Itoa allocates for every status over 99.
var statusLabels = func() (l [500]string) {
	for i := range l {
		l[i] = strconv.Itoa(100 + i)
	}
	return l
}()

func statusLabel(status int) string {
	if status >= 100 && status < 600 {
		return statusLabels[status-100]
	}
	return strconv.Itoa(status)
}
