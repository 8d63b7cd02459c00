package api

import (
	"crypto/sha256"
	"strings"

	"github.com/labstack/echo/v4"

	"smsgw/otp"
)

// APIKey is a caller's key as configured: only its SHA-256 is known.
type APIKey struct {
	Name    string
	SHA256  [32]byte
	Enabled bool
	// ForwardClientIP lets the key's requests carry "client_ip": a backend
	// calling for its users.
	ForwardClientIP bool
}

const (
	ctxAPIKey   = "smsgw.api_key"
	ctxForwards = "smsgw.forwards_client_ip"
)

// apiKeyName is the name of the key the request came with.
func apiKeyName(c echo.Context) string {
	n, _ := c.Get(ctxAPIKey).(string)
	return n
}

// requireAPIKey guards send and verify when keys are configured: the bearer
// token's SHA-256 must be an enabled key's. Looking the digest up in a map
// leaks nothing useful through timing: an attacker learns about the digest,
// never the key. Refused calls are audited.
func (s *Server) requireAPIKey(kind string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		if len(s.apiKeys) == 0 {
			return next
		}
		return func(c echo.Context) error {
			token, ok := strings.CutPrefix(c.Request().Header.Get(echo.HeaderAuthorization), "Bearer ")
			k, known := s.apiKeys[sha256.Sum256([]byte(token))]
			if !ok || token == "" || !known || !k.Enabled {
				reason := "missing_key"
				switch {
				case known && !k.Enabled:
					reason = "disabled_key"
				case ok && token != "":
					reason = "unknown_key"
				}
				ev := requestEvent(c, kind)
				ev.Outcome, ev.Reason, ev.APIKey = otp.EUnauthorized, reason, k.Name
				s.note(ev, s.Service.ClientNetwork(ev.ClientIP))
				c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="smsgw"`)
				return otp.Errorf(otp.EUnauthorized, "a valid API key is required: Authorization: Bearer <key>")
			}
			c.Set(ctxAPIKey, k.Name)
			c.Set(ctxForwards, k.ForwardClientIP)
			return next(c)
		}
	}
}
