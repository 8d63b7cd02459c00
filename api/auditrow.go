package api

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"smsgw/otp"
)

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

// auditTimeout bounds the wait for a row to be durable.
const auditTimeout = otp.AuditTimeout

// refuseMalformed is where a send or a verify starts: a malformed request
// (its shape error in malformed) is audited as invalid_request and
// answered with that error. nil: go on. Whether rows can be made durable
// at all is the domain's first question (otp.Service.Send and Verify).
func (s *Server) refuseMalformed(ev otp.AuditEvent, malformed error) error {
	if malformed != nil {
		ev.Outcome, ev.Reason = otp.EInvalidRequest, otp.ErrorCode(malformed)
		s.note(ev, s.Service.ClientNetwork(ev.ClientIP))
		return malformed
	}
	return nil
}

// answered records a send's or verify's row as its answer needs: durable
// before the answer when the request texted or changed a code (otp.Waits),
// else noted without waiting, counted against the subject that subject
// names (computed only then).
func (s *Server) answered(ctx context.Context, ev otp.AuditEvent, subject func() string) error {
	if otp.Waits(ev.Kind, ev.Outcome) {
		return s.durable(ctx, ev)
	}
	s.note(ev, subject())
	return nil
}

// note records an answer that texted nobody and changed no code: counted
// now, written without the client waiting (see otp.AuditLog.Note).
func (s *Server) note(ev otp.AuditEvent, subject string) {
	s.m.outcomes.WithLabelValues(ev.Kind, ev.Outcome, ev.Reason).Inc()
	s.AuditLog.Note(ev, subject)
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
