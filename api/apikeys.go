package api

import (
	"crypto/sha256"
	"log/slog"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"smsgw/otp"
)

// APIKey is a caller's key as configured: only its SHA-256 is known.
type APIKey struct {
	Name    string
	SHA256  [32]byte
	Enabled bool
}

const ctxAPIKey = "smsgw.api_key"

// apiKeyName is the name of the key the request came with.
func apiKeyName(c echo.Context) string {
	n, _ := c.Get(ctxAPIKey).(string)
	return n
}

// requireAPIKey guards send and verify when keys are configured: the bearer
// token's SHA-256 must be an enabled key's. Looking the digest up in a map
// leaks nothing useful through timing: an attacker learns about the digest,
// never the key. Refused calls are audited.
func requireAPIKey(keys []APIKey, kind string, auditLog otp.AuditLog, log *slog.Logger, m *httpMetrics) echo.MiddlewareFunc {
	byHash := make(map[[32]byte]APIKey, len(keys))
	for _, k := range keys {
		byHash[k.SHA256] = k
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		if len(keys) == 0 {
			return next
		}
		return func(c echo.Context) error {
			token, ok := strings.CutPrefix(c.Request().Header.Get(echo.HeaderAuthorization), "Bearer ")
			k, known := byHash[sha256.Sum256([]byte(token))]
			if !ok || token == "" || !known || !k.Enabled {
				reason := "missing_key"
				switch {
				case known && !k.Enabled:
					reason = "disabled_key"
				case ok && token != "":
					reason = "unknown_key"
				}
				record(c.Request().Context(), auditLog, log, m, otp.AuditEvent{ID: newID(), Time: time.Now().UTC(), Kind: kind,
					Outcome: otp.EUnauthorized, Reason: reason, RequestID: requestID(c), ClientIP: clientIP(c), APIKey: k.Name})
				c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="smsgw"`)
				return otp.Errorf(otp.EUnauthorized, "a valid API key is required: Authorization: Bearer <key>")
			}
			c.Set(ctxAPIKey, k.Name)
			return next(c)
		}
	}
}
