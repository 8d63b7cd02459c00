package api

import (
	"log/slog"
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
	// ClientIP is the end user's address, from a backend allowed to send it.
	ClientIP string `json:"client_ip"`
	// LimitKeys are the backend's own subjects (account, session, device).
	LimitKeys map[string]string `json:"limit_keys"`
	// AppHash is the Android app's SMS Retriever hash (otp.ValidAppHash).
	AppHash string `json:"app_hash"`
}

type sendResponse struct {
	ID             string `json:"id"`
	VerificationID string `json:"verification_id"`
	Phone          string `json:"phone"`
	Status         string `json:"status"`
	ExpiresIn      int64  `json:"expires_in"`
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
	if r.AppHash != "" && !otp.ValidAppHash(r.AppHash) {
		return otp.Errorf(otp.EInvalidRequest, "app_hash must be the 11 characters (A-Z a-z 0-9 + /) of an Android app's SMS Retriever hash")
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

	var (
		req  sendRequest
		body []byte
		held bool // req is a refused body's, decoded before
	)
	key, err := idempotencyKey(c.Request().Header)
	if err == nil {
		body, err = readJSON(c.Request())
	}
	if err == nil {
		if req, held = s.heldRequests.lookup(body); !held {
			err = decodeSend(c, body, &ev, &req)
		}
	}
	if err := s.refuseMalformed(ev, err); err != nil {
		return err
	}

	res, err := s.Service.Send(ctx, otp.SendRequest{
		Ticket: ticket, RequestID: ev.RequestID, Phone: req.Phone, Region: req.Region, Locale: req.Locale,
		ClientIP: ev.ClientIP, IdempotencyKey: key, ChallengeToken: req.ChallengeToken, Row: ev,
		LimitKeys: req.LimitKeys,
		Text:      keyText(c), AppHash: req.AppHash,
	})
	ev.Phone, ev.Reason = res.Phone.E164, res.Reason
	s.fanout.saw(ctx, ev.ClientIP, res.Phone.E164)
	ev.Provider, ev.MessageID, ev.Segments = res.Receipt.Provider, res.Receipt.MessageID, res.Segments
	setOutcome(&ev, err, otp.OutcomeSent)
	if err == nil && res.Segments > 0 {
		s.m.segments.WithLabelValues(res.Phone.Country()).Add(float64(res.Segments))
	}
	if res.Sending {
		// The flow made the row durable as sending, or the log keeps it
		// as sending until it can be: its final outcome follows on the
		// same row without the client waiting for it.
		s.m.outcomes.WithLabelValues(ev.Kind, ev.Outcome, ev.Reason).Inc()
		s.AuditLog.Finish(ev)
	} else if rerr := s.answered(ctx, ev, func() string {
		return s.Service.AuditSubject(res.Decision, res.Refusal, res.Phone, ev.ClientIP)
	}); rerr != nil {
		return rerr
	}
	if err != nil && otp.ErrorCode(err) == otp.ERateLimited && !held && s.heldRequests.cacheable(body, &req) {
		s.heldRequests.keep(body, req)
	}
	switch {
	case res.Refusal != nil:
		// The rule that refused, not the windows it never reached.
		setRuleHeaders(c.Response().Header(), *res.Refusal, time.Now())
	case res.Limited && !res.Decision.Allowed && err != nil && otp.ErrorCode(err) == otp.ERateLimited:
		// The limiter's refusal: its answer (what answerError would write
		// for RateLimitedError(res.Decision)) built once per wait.
		return s.answerHeld(c, s.heldAnswers.answer(res.Decision))
	case res.Limited:
		setLimitHeaders(c.Response().Header(), res.Decision)
	}
	if err != nil {
		return err
	}
	if res.Replayed {
		c.Response().Header().Set("Idempotent-Replayed", "true")
	}
	s.recordSent(ctx, res, ev)
	return answerAccepted(c, sendResponse{
		ID: res.RequestID, VerificationID: res.VerificationID, Phone: res.Phone.E164, Status: "pending",
		ExpiresIn: ceilSeconds(res.ExpiresIn),
	})
}

// decodeSend decodes and checks a send's body as readRequest does, then
// checks its limit_keys against the caller's key.
func decodeSend(c echo.Context, body []byte, ev *otp.AuditEvent, req *sendRequest) error {
	if err := checkRequest(c, body, ev, req, &req.ClientIP); err != nil {
		return err
	}
	return limitKeysAllowed(c, req.LimitKeys)
}

// answerHeld writes a limiter refusal's answer as answerError writes its
// error: the same headers, status and body.
func (s *Server) answerHeld(c echo.Context, a *heldAnswer) error {
	a.setHeaders(c.Response().Header())
	if ctx := c.Request().Context(); s.log.Enabled(ctx, slog.LevelDebug) {
		s.log.DebugContext(ctx, "client error", "method", c.Request().Method, "path", c.Path(), "code", otp.ERateLimited)
	}
	if c.Request().Method == http.MethodHead {
		return c.NoContent(http.StatusTooManyRequests)
	}
	return c.JSONBlob(http.StatusTooManyRequests, a.body)
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
