package api

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"smsgw/otp"
)

type sendRequest struct {
	Phone  string `json:"phone"`
	Region string `json:"region"`
	Locale string `json:"locale"`
	// ChallengeToken is a solved bot challenge (see pumping.challenge).
	ChallengeToken string `json:"challenge_token"`
}

type sendResponse struct {
	ID        string `json:"id"`
	Phone     string `json:"phone"`
	Status    string `json:"status"`
	ExpiresIn int64  `json:"expires_in"`
}

// validate checks the request's shape; the number itself is the domain's job.
func (r sendRequest) validate() error {
	if r.Phone == "" {
		return otp.Errorf(otp.EInvalidRequest, "phone is required")
	}
	if err := checkRegion(r.Region); err != nil {
		return err
	}
	if len(r.Locale) > 35 {
		return otp.Errorf(otp.EInvalidRequest, "locale must be a BCP 47 language tag such as \"es-MX\"")
	}
	if len(r.ChallengeToken) > 4096 {
		return otp.Errorf(otp.EInvalidRequest, "challenge_token is longer than 4096 bytes")
	}
	return nil
}

// checkRegion accepts an empty region (the default applies) or one shaped
// like an ISO 3166-1 alpha-2 code.
func checkRegion(region string) error {
	if region != "" && !otp.ValidRegion(region) {
		return otp.Errorf(otp.EInvalidRequest, "region must be an ISO 3166-1 alpha-2 code such as \"US\"")
	}
	return nil
}

func (s *Server) handleSend(c echo.Context) error {
	ctx := c.Request().Context()
	ev := requestEvent(c, otp.KindSend)
	ticket := ev.ID

	var req sendRequest
	key, err := idempotencyKey(c.Request().Header)
	if err == nil {
		err = decodeJSON(c.Request(), &req)
	}
	if err == nil {
		err = req.validate()
	}
	if err != nil {
		ev.Outcome, ev.Reason = otp.EInvalidRequest, otp.ErrorCode(err)
		if rerr := s.durable(ctx, ev); rerr != nil {
			return rerr
		}
		return err
	}
	if err := s.AuditLog.Accepting(); err != nil {
		return s.refuseUnaudited(ctx, ev, err)
	}

	row := &sendRow{log: s.AuditLog, ev: ev}
	res, err := s.Service.Send(ctx, otp.SendRequest{
		Ticket: ticket, RequestID: ev.RequestID, Phone: req.Phone, Region: req.Region, Locale: req.Locale,
		ClientIP: ev.ClientIP, IdempotencyKey: key, ChallengeToken: req.ChallengeToken, Audit: row,
	})
	ev.Phone, ev.Reason = res.Phone.E164, res.Reason
	ev.Provider, ev.MessageID = res.Receipt.Provider, res.Receipt.MessageID
	setOutcome(&ev, err, otp.OutcomeSent)
	if row.failed {
		ev.Reason = otp.ReasonAudit
	}
	if row.durable {
		// The row is durable as sending: its final outcome follows
		// without the client waiting for it.
		s.m.outcomes.WithLabelValues(ev.Kind, ev.Outcome, ev.Reason).Inc()
		s.AuditLog.Finish(ev)
	} else if rerr := s.durable(ctx, ev); rerr != nil {
		return rerr
	}
	if res.Limited {
		setLimitHeaders(c.Response().Header(), res.Decision)
	}
	if err != nil {
		return err
	}
	if res.Replayed {
		c.Response().Header().Set("Idempotent-Replayed", "true")
	}
	return c.JSON(http.StatusAccepted, sendResponse{
		ID: res.RequestID, Phone: res.Phone.E164, Status: "pending", ExpiresIn: ceilSeconds(res.ExpiresIn),
	})
}

// idempotencyKey reads the optional Idempotency-Key header: 1 to 255
// printable ASCII characters (a UUID is typical).
func idempotencyKey(h http.Header) (string, error) {
	values := h.Values("Idempotency-Key")
	if len(values) == 0 {
		return "", nil
	}
	k := values[0]
	if len(values) > 1 || len(k) == 0 || len(k) > 255 {
		return "", otp.Errorf(otp.EInvalidRequest, "Idempotency-Key must be one value of 1 to 255 printable ASCII characters")
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return "", otp.Errorf(otp.EInvalidRequest, "Idempotency-Key must be one value of 1 to 255 printable ASCII characters")
		}
	}
	return k, nil
}

// requestEvent starts the audit row of a send or verify request. Its id is
// also the request's ticket: unique, made here, never the client's.
func requestEvent(c echo.Context, kind string) otp.AuditEvent {
	return otp.AuditEvent{ID: newID(), Time: time.Now().UTC(), Kind: kind,
		RequestID: requestID(c), ClientIP: clientIP(c), APIKey: apiKeyName(c)}
}

// setOutcome records how the request ended; a failure without a reason of
// its own gets its error code as the reason.
func setOutcome(ev *otp.AuditEvent, err error, success string) {
	ev.Outcome = outcomeOf(err, success)
	if ev.Outcome == otp.EUnavailable && ev.Reason == "" {
		ev.Reason = otp.ErrorCode(err)
	}
}

// outcomeOf names the audit outcome of a request that ended with err. Codes
// outside the audit vocabulary (internal errors) are recorded as unavailable,
// with the code as the reason.
func outcomeOf(err error, success string) string {
	if err == nil {
		return success
	}
	switch code := otp.ErrorCode(err); code {
	case otp.EInvalidRequest, otp.EInvalidPhone, otp.EPhoneNotAllowed, otp.ERateLimited,
		otp.EProviderError, otp.EUnavailable, otp.EInvalidCode, otp.ENoPendingCode:
		return code
	case otp.EUnsupportedMediaType, otp.ERequestTooLarge:
		return otp.EInvalidRequest
	case otp.EChallengeRequired:
		// A challenge stands in for a pumping rule's refusal: refused like
		// one, the reason saying a challenge was asked for.
		return otp.ERateLimited
	default:
		return otp.EUnavailable
	}
}

// sendRow is a send's audit row, written with outcome sending when the send
// flow is about to call a provider.
type sendRow struct {
	log     otp.AuditLog
	ev      otp.AuditEvent
	durable bool // the row is durable as sending
	failed  bool // it could not be made durable: nothing was texted
}

func (r *sendRow) Sending(ctx context.Context, phone otp.Phone, reason string) error {
	e := r.ev
	e.Phone, e.Outcome, e.Reason = phone.E164, otp.OutcomeSending, reason
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditTimeout)
	defer cancel()
	if err := r.log.Record(rctx, e); err != nil {
		r.failed = true
		return err
	}
	r.durable = true
	return nil
}

// auditTimeout bounds the wait for a row to be durable.
const auditTimeout = 5 * time.Second

// refuseUnaudited answers 503 to a request that would text or consume
// something while rows cannot be made durable. Its own row is kept by the
// audit log, which writes it once it can.
func (s *Server) refuseUnaudited(ctx context.Context, ev otp.AuditEvent, cause error) error {
	ev.Outcome, ev.Reason = otp.EUnavailable, otp.ReasonAudit
	if err := s.durable(ctx, ev); err != nil {
		return err
	}
	return &otp.Error{Code: otp.EUnavailable, Message: "the service is temporarily unavailable", Err: cause}
}

// durable makes the request's audit row durable before the request is
// answered. If it cannot be, the answer is 503 unavailable whatever the
// request's outcome, so no client holds an answer the audit trail may not
// show; the audit log keeps the row and writes it when it can.
func (s *Server) durable(ctx context.Context, ev otp.AuditEvent) error {
	s.m.outcomes.WithLabelValues(ev.Kind, ev.Outcome, ev.Reason).Inc()
	// The row must be taken even if the client has gone.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditTimeout)
	defer cancel()
	if err := s.AuditLog.Record(rctx, ev); err != nil {
		s.log.ErrorContext(ctx, "audit row not durable: answering 503", "kind", ev.Kind, "outcome", ev.Outcome, "err", err)
		s.m.unaudited.Inc()
		return &otp.Error{Code: otp.EUnavailable, Message: "the service is temporarily unavailable", Err: err}
	}
	return nil
}

// record is durable for admin calls, which drop the connection unanswered
// rather than answer without a row.
func (s *Server) record(ctx context.Context, ev otp.AuditEvent) {
	if err := s.durable(ctx, ev); err != nil {
		panic(http.ErrAbortHandler)
	}
}
