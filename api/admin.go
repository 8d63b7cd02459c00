package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
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
func requireAdmin(token string, auditLog otp.AuditLog, log *slog.Logger, m *httpMetrics) echo.MiddlewareFunc {
	want := sha256.Sum256([]byte(token))
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if token == "" {
				return otp.Errorf(otp.ENotFound, "no such endpoint")
			}
			got, ok := strings.CutPrefix(c.Request().Header.Get(echo.HeaderAuthorization), "Bearer ")
			sum := sha256.Sum256([]byte(got))
			if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
				ev := adminEvent(c, "auth")
				ev.Outcome = otp.EUnauthorized
				record(c.Request().Context(), auditLog, log, m, ev)
				c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="smsgw admin"`)
				return otp.Errorf(otp.EUnauthorized, "a valid admin bearer token is required")
			}
			return next(c)
		}
	}
}

func adminEvent(c echo.Context, action string) otp.AuditEvent {
	return otp.AuditEvent{ID: newID(), Time: time.Now().UTC(), Kind: otp.KindAdmin,
		RequestID: requestID(c), ClientIP: clientIP(c), Reason: action}
}

// auditAdmin records an admin action with its outcome.
func auditAdmin(ctx context.Context, c echo.Context, auditLog otp.AuditLog, log *slog.Logger, m *httpMetrics, action, phone string, err error) {
	ev := adminEvent(c, action)
	ev.Phone = phone
	ev.Outcome = "ok"
	if err != nil {
		ev.Outcome = otp.ErrorCode(err)
	}
	record(ctx, auditLog, log, m, ev)
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
	Windows []limitWindowJSON `json:"windows"`
	Code    *pendingCodeJSON  `json:"code,omitempty"`
}

func limitsBody(v otp.SupportView, maxAttempts int) limitsJSON {
	out := limitsJSON{Phone: v.Phone, IP: v.IP, Windows: make([]limitWindowJSON, 0, len(v.Windows))}
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
func handleAdminLimits(svc *otp.Service, maxAttempts int, auditLog otp.AuditLog, log *slog.Logger, m *httpMetrics) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		phone, ip := c.QueryParam("phone"), c.QueryParam("ip")
		phone = plusFromQuery(phone)
		action, op := "limits.get", svc.Limits
		if c.Request().Method == http.MethodDelete {
			action, op = "limits.delete", svc.ResetLimits
		}
		v, err := op(ctx, phone, ip)
		auditAdmin(ctx, c, auditLog, log, m, action, v.Phone, err)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, limitsBody(v, maxAttempts))
	}
}

const (
	defaultAuditLimit = 50
	maxAuditLimit     = 1000
)

// handleAdminAudit lists the newest audit rows, of one phone or of all.
func handleAdminAudit(reader otp.AuditReader, defaultRegion string, auditLog otp.AuditLog, log *slog.Logger, m *httpMetrics) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		rows, phone, err := readAudit(ctx, c, reader, defaultRegion)
		auditAdmin(ctx, c, auditLog, log, m, "audit.get", phone, err)
		if err != nil {
			return err
		}
		if rows == nil {
			rows = []otp.AuditEvent{}
		}
		// Each row in its one JSON shape, named by the table's columns.
		return c.JSON(http.StatusOK, rows)
	}
}

func readAudit(ctx context.Context, c echo.Context, reader otp.AuditReader, defaultRegion string) ([]otp.AuditEvent, string, error) {
	limit := defaultAuditLimit
	if s := c.QueryParam("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxAuditLimit {
			return nil, "", otp.Errorf(otp.EInvalidRequest, "limit must be a whole number from 1 to %d", maxAuditLimit)
		}
		limit = n
	}
	phone, err := queryPhone(c, defaultRegion)
	if err != nil {
		return nil, "", err
	}
	if reader == nil {
		return nil, phone, otp.Errorf(otp.EUnavailable, "audit queries need Postgres; in -dev the audit log is printed to stderr")
	}
	rows, err := reader.Recent(ctx, phone, limit)
	if err != nil {
		return nil, phone, &otp.Error{Code: otp.EUnavailable, Message: "the audit log is temporarily unavailable", Err: err}
	}
	return rows, phone, nil
}

// queryPhone reads an optional ?phone= as E.164 ("" when absent), in any
// notation a send accepts.
func queryPhone(c echo.Context, defaultRegion string) (string, error) {
	raw := plusFromQuery(c.QueryParam("phone"))
	if raw == "" {
		return "", nil
	}
	p, err := otp.ParsePhone(raw, defaultRegion)
	if err != nil {
		return "", err
	}
	return p.E164, nil
}

// plusFromQuery undoes what an unencoded "+" becomes in a query string (a
// space), so "?phone=+14155552671" works as people type it.
func plusFromQuery(s string) string {
	if strings.HasPrefix(s, " ") {
		return "+" + strings.TrimLeft(s, " ")
	}
	return s
}
