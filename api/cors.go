package api

import (
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"smsgw/otp"
)

// corsExposed are the response headers a browser page may read: the limit
// headers tell it when to offer "send again".
var corsExposed = strings.Join([]string{"X-Request-ID", "RateLimit-Policy", "RateLimit", "Retry-After",
	"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Idempotent-Replayed"}, ", ")

const corsAllowedHeaders = "Content-Type, Authorization, Idempotency-Key, X-Request-ID"

// cors lets the pages of the configured origins call send and verify from
// the browser. Origins match exactly (scheme, host, port); "*" allows any
// page but never with credentials, as browsers require. A preflight from an
// allowed origin is answered 204; from any other, 403, which says where to
// allow it, also when no origin is configured (a page's developer then sees
// why, not a bare CORS failure). Without origins nothing else changes.
func cors(origins []string) echo.MiddlewareFunc {
	wildcard := slices.Contains(origins, "*")
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r, h := c.Request(), c.Response().Header()
			if !strings.HasPrefix(r.URL.Path, "/v1/otp/") {
				return next(c)
			}
			preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
			if len(origins) == 0 {
				if preflight {
					return otp.Errorf(otp.EForbidden, "no page may call smsgw from a browser: server.cors_origins is empty; list the page's origin %q there", r.Header.Get("Origin"))
				}
				return next(c)
			}
			h.Add("Vary", "Origin")
			origin := r.Header.Get("Origin")
			allowed := origin != "" && (wildcard || slices.Contains(origins, strings.ToLower(origin)))
			if preflight {
				h.Add("Vary", "Access-Control-Request-Method")
				h.Add("Vary", "Access-Control-Request-Headers")
				if !allowed {
					return otp.Errorf(otp.EForbidden, "origin %q may not call smsgw from a browser (server.cors_origins)", origin)
				}
				setAllowOrigin(h, origin, wildcard)
				h.Set("Access-Control-Allow-Methods", "POST")
				h.Set("Access-Control-Allow-Headers", corsAllowedHeaders)
				h.Set("Access-Control-Max-Age", "600")
				return c.NoContent(http.StatusNoContent)
			}
			if allowed {
				setAllowOrigin(h, origin, wildcard)
				h.Set("Access-Control-Expose-Headers", corsExposed)
			}
			return next(c)
		}
	}
}

func setAllowOrigin(h http.Header, origin string, wildcard bool) {
	if wildcard {
		h.Set("Access-Control-Allow-Origin", "*")
		return
	}
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Allow-Credentials", "true")
}
