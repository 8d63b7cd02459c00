package api

import (
	"crypto/sha256"
	"slices"
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
	// Publishable marks a browser's key, seen by anyone who opens the page:
	// it is accepted only with an Origin among Origins (exact, lowercase),
	// never with client_ip or limit_keys, so every limit counts the
	// browser's own address and a copied key buys no one else's budget.
	Publishable bool
	Origins     []string
	// Text is the key's locale, app name, WebOTP domain and app hash for
	// its sends (Text.Locale is unused: that is the request's).
	Text otp.TextOptions
}

const (
	ctxAPIKey      = "smsgw.api_key"
	ctxForwards    = "smsgw.forwards_client_ip"
	ctxPublishable = "smsgw.publishable_key"
	ctxText        = "smsgw.key_text"
)

// publishableKey tells whether the request came with a publishable key.
func publishableKey(c echo.Context) bool {
	p, _ := c.Get(ctxPublishable).(bool)
	return p
}

// apiKeyName is the name of the key the request came with.
func apiKeyName(c echo.Context) string {
	n, _ := c.Get(ctxAPIKey).(string)
	return n
}

// keyText is the text settings of the key the request came with.
func keyText(c echo.Context) otp.TextOptions {
	t, _ := c.Get(ctxText).(otp.TextOptions)
	return t
}

// requireAPIKey guards send and verify when keys are configured: the bearer
// token's SHA-256 must be an enabled key's. Looking the digest up in a map
// leaks nothing useful through timing: an attacker learns about the digest,
// never the key. A publishable key from an Origin it does not list is
// refused like an unknown one. Refused calls are audited.
func (s *Server) requireAPIKey(kind string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		if len(s.apiKeys) == 0 {
			return next
		}
		return func(c echo.Context) error {
			token, ok := strings.CutPrefix(c.Request().Header.Get(echo.HeaderAuthorization), "Bearer ")
			k, known := s.apiKeys[sha256.Sum256([]byte(token))]
			wrongOrigin := known && k.Publishable && !slices.Contains(k.Origins, strings.ToLower(c.Request().Header.Get("Origin")))
			if !ok || token == "" || !known || !k.Enabled || wrongOrigin {
				reason := "missing_key"
				switch {
				case known && !k.Enabled:
					reason = "disabled_key"
				case wrongOrigin:
					reason = "origin_not_allowed"
				case ok && token != "":
					reason = "unknown_key"
				}
				ev := requestEvent(c, kind)
				ev.Outcome, ev.Reason, ev.APIKey = otp.EUnauthorized, reason, k.Name
				s.note(ev, s.Service.ClientNetwork(ev.ClientIP))
				c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="smsgw"`)
				if wrongOrigin {
					return otp.Errorf(otp.EUnauthorized, "this publishable key is accepted only from the page origins its [[api.keys]] entry lists")
				}
				return otp.Errorf(otp.EUnauthorized, "a valid API key is required: Authorization: Bearer <key>")
			}
			c.Set(ctxAPIKey, k.Name)
			c.Set(ctxForwards, k.ForwardClientIP)
			c.Set(ctxPublishable, k.Publishable)
			c.Set(ctxText, k.Text)
			return next(c)
		}
	}
}
