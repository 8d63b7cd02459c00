package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"smsgw/otp"
)

// requireAdmin guards the admin API. Without a configured token the admin API
// does not exist (404); with one, a request must carry it as a bearer token
// (401 otherwise). Tokens are compared as SHA-256 digests in constant time, so
// neither their content nor their length leaks through timing. Refused
// attempts are audited like every admin action.
func (s *Server) requireAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.cfg.AdminToken == "" {
			return otp.Errorf(otp.ENotFound, "no such endpoint")
		}
		if wait, blocked := s.AdminFailures.Blocked(clientIP(c)); blocked {
			ev := adminEvent(c, "auth")
			ev.Outcome = otp.ERateLimited
			s.record(c.Request().Context(), ev)
			secs := int64((wait + time.Second - 1) / time.Second)
			return &otp.Error{Code: otp.ERateLimited, RetryAfter: secs, Fields: map[string]any{"scope": "admin_auth"},
				Message: fmt.Sprintf("too many wrong admin tokens from this address; retry in %d s", secs)}
		}
		got, ok := strings.CutPrefix(c.Request().Header.Get(echo.HeaderAuthorization), "Bearer ")
		sum := sha256.Sum256([]byte(got))
		if !ok || subtle.ConstantTimeCompare(sum[:], s.adminToken[:]) != 1 {
			s.AdminFailures.Failed(clientIP(c))
			ev := adminEvent(c, "auth")
			ev.Outcome = otp.EUnauthorized
			s.record(c.Request().Context(), ev)
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="smsgw admin"`)
			return otp.Errorf(otp.EUnauthorized, "a valid admin bearer token is required")
		}
		return next(c)
	}
}

func adminEvent(c echo.Context, action string) otp.AuditEvent {
	return otp.AuditEvent{ID: newID(), Time: time.Now().UTC(), Kind: otp.KindAdmin,
		RequestID: requestID(c), ClientIP: clientIP(c), Reason: action}
}

// auditAdmin records an admin action with its outcome.
func (s *Server) auditAdmin(c echo.Context, action, phone string, err error) {
	ev := adminEvent(c, action)
	ev.Phone = phone
	ev.Outcome = "ok"
	if err != nil {
		ev.Outcome = otp.ErrorCode(err)
	}
	s.record(c.Request().Context(), ev)
}

type limitWindowJSON struct {
	Policy    string `json:"policy"`
	Scope     string `json:"scope"`
	Window    string `json:"window"`
	Limit     int    `json:"limit"`
	Used      int    `json:"used"`
	Remaining int    `json:"remaining"`
	Reset     int64  `json:"reset"` // seconds until the window gives back quota
}

type pendingCodeJSON struct {
	Pending      bool  `json:"pending"`
	Attempts     int   `json:"attempts,omitempty"`
	AttemptsLeft int   `json:"attempts_left,omitempty"`
	ExpiresIn    int64 `json:"expires_in,omitempty"`
}

type limitsJSON struct {
	Phone   string            `json:"phone,omitempty"`
	IP      string            `json:"ip,omitempty"`
	Key     string            `json:"key,omitempty"`
	Windows []limitWindowJSON `json:"windows"`
	Code    *pendingCodeJSON  `json:"code,omitempty"`
	// Pumping lists, for a phone, the pumping holds covering it.
	Pumping []pumpingHoldJSON `json:"pumping,omitempty"`
}

func limitsBody(v otp.SupportView, maxAttempts int) limitsJSON {
	out := limitsJSON{Phone: v.Phone, IP: v.IP, Key: v.Key, Windows: make([]limitWindowJSON, 0, len(v.Windows))}
	for _, w := range v.Windows {
		out.Windows = append(out.Windows, limitWindowJSON{
			Policy: w.Policy, Scope: w.Scope, Window: w.Rule.Label(), Limit: w.Rule.Max,
			Used: w.Used, Remaining: w.Remaining(), Reset: ceilSeconds(w.Reset),
		})
	}
	if v.Phone != "" {
		out.Code = &pendingCodeJSON{}
		if v.Code != nil {
			out.Code = &pendingCodeJSON{Pending: true, Attempts: v.Code.Attempts,
				AttemptsLeft: max(maxAttempts-v.Code.Attempts, 0), ExpiresIn: ceilSeconds(v.Code.ExpiresIn)}
		}
	}
	return out
}

// handleAdminLimits shows (GET) or clears (DELETE) what is counted for one
// phone or one client IP.
func (s *Server) handleAdminLimits(c echo.Context) error {
	action, op := "limits.get", s.Service.Limits
	if c.Request().Method == http.MethodDelete {
		action, op = "limits.delete", s.Service.ResetLimits
	}
	if name := c.QueryParam("key"); name != "" || c.QueryParam("value") != "" {
		var v otp.SupportView
		var err error = otp.Errorf(otp.EInvalidRequest, "give exactly one of phone, ip and key")
		if c.QueryParam("phone") == "" && c.QueryParam("ip") == "" {
			v, err = s.Service.KeyLimits(c.Request().Context(), name, c.QueryParam("value"), action == "limits.delete")
		}
		s.auditAdmin(c, action, "", err)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, limitsBody(v, s.cfg.MaxAttempts))
	}
	phone, err := otp.ParseQueryPhone(c.QueryParam("phone"), s.cfg.DefaultRegion)
	lift := false
	if err == nil && c.Request().Method == http.MethodDelete {
		lift, err = liftPumping(c)
	}
	var v otp.SupportView
	if err == nil {
		v, err = op(c.Request().Context(), phone, c.QueryParam("ip"))
	}
	s.auditAdmin(c, action, v.Phone, err)
	if err != nil {
		return err
	}
	body := limitsBody(v, s.cfg.MaxAttempts)
	if body.Pumping, err = s.phoneHolds(c, phone, lift); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, body)
}

const (
	defaultAuditLimit = 50
	maxAuditLimit     = 1000
)

// handleAdminAudit lists the newest audit rows, of one phone or of all.
func (s *Server) handleAdminAudit(c echo.Context) error {
	rows, phone, err := s.readAudit(c)
	s.auditAdmin(c, "audit.get", phone, err)
	if err != nil {
		return err
	}
	if rows == nil {
		rows = []otp.AuditEvent{}
	}
	// Each row in its one JSON shape, named by the table's columns.
	return c.JSON(http.StatusOK, rows)
}

func (s *Server) readAudit(c echo.Context) ([]otp.AuditEvent, string, error) {
	limit := defaultAuditLimit
	if q := c.QueryParam("limit"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 || n > maxAuditLimit {
			return nil, "", otp.Errorf(otp.EInvalidRequest, "limit must be a whole number from 1 to %d", maxAuditLimit)
		}
		limit = n
	}
	phone, err := otp.ParseQueryPhone(c.QueryParam("phone"), s.cfg.DefaultRegion)
	if err != nil {
		return nil, "", err
	}
	rows, err := s.AuditReader.Recent(c.Request().Context(), phone, limit)
	if err != nil {
		return nil, phone, asUnavailable(err, "the audit log is temporarily unavailable")
	}
	return rows, phone, nil
}

// asUnavailable keeps a dependency's own client error (a stand-in saying
// what is missing) and makes anything else a 503 with msg.
func asUnavailable(err error, msg string) error {
	var e *otp.Error
	if errors.As(err, &e) {
		return e
	}
	return &otp.Error{Code: otp.EUnavailable, Message: msg, Err: err}
}
