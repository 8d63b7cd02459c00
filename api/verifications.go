package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"smsgw/otp"
)

// verificationResponse is a verification as callers see it: never the code.
type verificationResponse struct {
	VerificationID string    `json:"verification_id"`
	Phone          string    `json:"phone"`
	Status         string    `json:"status"`
	Sends          int       `json:"sends"`
	AttemptsLeft   int       `json:"attempts_left"`
	DeliveryStatus *string   `json:"delivery_status"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	ExpiresAt      time.Time `json:"expires_at"`
}

func verificationBody(v otp.Verification) verificationResponse {
	r := verificationResponse{VerificationID: v.ID, Phone: v.Phone, Status: v.Status, Sends: v.Sends,
		AttemptsLeft: v.AttemptsLeft, CreatedAt: v.CreatedAt.UTC(), UpdatedAt: v.UpdatedAt.UTC(), ExpiresAt: v.ExpiresAt.UTC()}
	if v.DeliveryStatus != "" {
		r.DeliveryStatus = &v.DeliveryStatus
	}
	return r
}

const ctxCaller = "smsgw.verification_caller"

// requireCaller guards the verification routes: an enabled secret API key
// (which sees the verifications it started) or the admin token (which sees
// all); 401 otherwise, also when no key is configured. A publishable key is
// in every visitor's hands: it sees none.
func (s *Server) requireCaller(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		token, ok := strings.CutPrefix(c.Request().Header.Get(echo.HeaderAuthorization), "Bearer ")
		sum := sha256.Sum256([]byte(token))
		switch k, known := s.apiKeys[sum]; {
		case !ok || token == "":
		case s.cfg.AdminToken != "" && subtle.ConstantTimeCompare(sum[:], s.adminToken[:]) == 1:
			c.Set(ctxCaller, otp.Caller{Admin: true})
			return next(c)
		case known && k.Enabled && !k.Publishable:
			c.Set(ctxCaller, otp.Caller{APIKey: k.Name})
			return next(c)
		}
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="smsgw"`)
		return otp.Errorf(otp.EUnauthorized, "an API key or the admin token is required: Authorization: Bearer <key>")
	}
}

func caller(c echo.Context) otp.Caller {
	cl, _ := c.Get(ctxCaller).(otp.Caller)
	return cl
}

func (s *Server) handleGetVerification(c echo.Context) error {
	v, err := s.Service.Verification(c.Request().Context(), c.Param("id"), caller(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, verificationBody(v))
}

func (s *Server) handleCancelVerification(c echo.Context) error {
	v, err := s.Service.CancelVerification(c.Request().Context(), c.Param("id"), caller(c), requestID(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, verificationBody(v))
}

// recordSent writes an accepted send into its verification, with its event,
// before the answer. The text is out: a failure is logged and counted, and
// the answer stays 202.
func (s *Server) recordSent(ctx context.Context, res otp.SendResult, ev otp.AuditEvent) {
	if err := s.Service.RecordSent(ctx, res, ev.APIKey, ev.RequestID); err != nil {
		s.m.unrecorded.WithLabelValues(otp.KindSend).Inc()
		s.log.ErrorContext(ctx, "verification not recorded", "kind", otp.KindSend, "err", err)
	}
}

// recordChecked writes a verify that changed a code into its verification,
// with its event, before the answer; like recordSent, a failure is logged
// and counted (the code has changed in Redis already).
func (s *Server) recordChecked(ctx context.Context, res otp.VerifyResult, verr error, ev otp.AuditEvent) {
	if err := s.Service.RecordChecked(ctx, res, verr, ev.APIKey, ev.RequestID); err != nil {
		s.m.unrecorded.WithLabelValues(otp.KindVerify).Inc()
		s.log.ErrorContext(ctx, "verification not recorded", "kind", otp.KindVerify, "err", err)
	}
}
