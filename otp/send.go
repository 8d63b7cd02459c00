package otp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// SendRequest is a validated-shape request to text a code.
type SendRequest struct {
	// Ticket is unique per request (never client-chosen): it is what the
	// limiter records, so two requests in the same microsecond both count.
	Ticket    string
	RequestID string
	Phone     string
	Region    string
	Locale    string
	ClientIP  netip.Addr
	// Text is the API key's text settings (Locale above is the request's
	// own); AppHash the request's app_hash, which wins over the key's.
	Text    TextOptions
	AppHash string
	// IdempotencyKey, when set, makes a retry with the same key for the same
	// phone, within the code's lifetime, get the first answer again: no
	// second text, no second limit hit.
	IdempotencyKey string
	// ChallengeToken is a solved bot challenge, checked only when a pumping
	// rule would refuse the send.
	ChallengeToken string
	// LimitKeys are the caller's own subjects (see KeyRules), name to value.
	LimitKeys map[string]string
	// keySubjects are LimitKeys' windows, resolved by Send.
	keySubjects []Subject
	// Row is the request's audit row as its caller started it (ID, Time,
	// Kind, RequestID, ClientIP, APIKey): the flow makes it durable, as
	// sending, through Deps.AuditLog before any provider is called.
	Row AuditEvent
}

// SendResult is what happened to a send request. It is filled as far as the
// flow got, also when Send returns an error, so the caller can audit and set
// headers for refused requests.
type SendResult struct {
	Phone Phone

	// VerificationID names the code's verification; VerificationStarted
	// is true when this send began it (see Service.RecordSent).
	VerificationID      string
	VerificationStarted bool

	// Decision is valid when Limited is true: the limiter was asked.
	Decision Decision
	Limited  bool
	// Refusal is the pumping rule (or spend ceiling) that refused the send
	// or asked for a challenge: what its limit headers describe.
	Refusal   *PumpingRefusal
	Receipt   Receipt
	ExpiresIn time.Duration
	// Reason is the audit reason: the refusing window, the provider's,
	// "resend" when the pending code was texted again, or "idempotent_replay".
	Reason string
	// RequestID is the answered request's: the first one's on a replay.
	RequestID string
	// Segments is how many SMS segments the text takes (0: none was made).
	Segments int
	// Replayed is true when this is the stored answer to an earlier request
	// with the same Idempotency-Key.
	Replayed bool
	// Sending is set once the flow handed the request's row to the audit
	// log as sending (durable, or kept by the log until it can be): the
	// caller gives that row its final outcome with AuditLog.Finish instead
	// of writing one of its own.
	Sending bool
}

// Send texts a code to the request's phone if every limit has room. While a
// code is pending the same code is texted again, with its expiry renewed and
// its wrong attempts kept, so an earlier text still works and a resend never
// buys more guesses.
func (s *Service) Send(ctx context.Context, req SendRequest) (res SendResult, err error) {
	res.RequestID = req.RequestID
	if err := s.auditAccepting(); err != nil {
		res.Reason = ReasonAudit
		return res, err
	}
	if req.keySubjects, err = s.keySubjects(req.LimitKeys); err != nil {
		return res, err
	}
	phone, err := s.parsePhone(req.Phone, req.Region)
	if err != nil {
		return res, err
	}
	res.Phone = phone
	if reason := s.cfg.Policy.Refusal(phone); reason != "" {
		res.Reason = reason
		return res, notAllowed(reason)
	}
	text := req.Text
	text.Locale = req.Locale
	if req.AppHash != "" {
		// Refused before any quota is taken: the request, not a limit,
		// is wrong.
		text.AppHash = req.AppHash
		if err := s.Messages.CheckAppHash(text, phone.Country(), s.cfg.CodeLength); err != nil {
			res.Reason = "app_hash"
			return res, err
		}
	}
	gate := pumpingGate{s: s, req: req}
	if o, ok := s.Overrides.Lookup(phone.E164); ok {
		if o.Action == OverrideBlock {
			res.Reason = "override:block"
			return res, blocked(o)
		}
		gate.exempt = true
	}
	if s.isTestNumber(phone) {
		res.Reason, res.ExpiresIn = "test_number", s.cfg.CodeTTL
		res.VerificationID = testVerificationID(phone)
		res.Decision, res.Limited = untouched(time.Now(), s.requestSubjects(phone, req)), true
		return res, nil
	}

	// The idempotency scope this request claimed: settle sees the final
	// answer (res and err are the named results).
	var claimed string
	defer func() {
		if claimed != "" {
			s.settle(ctx, claimed, req.Ticket, res, err)
		}
	}()
	if done, err := s.held(ctx, req, phone, &gate, &res, &claimed); done {
		return res, err
	}
	// From here the request may hold quota: give it back if nothing is
	// texted. Once a text may go out, the flow finishes even if the client
	// leaves.
	sendCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.SendTimeout)
	defer cancel()
	a, err := s.admit(ctx, sendCtx, req, phone, &gate, &res, &claimed)
	if err != nil || res.Replayed {
		return res, err
	}
	// Both the windows and the pumping guard hold this send now.
	giveBack := func() {
		s.refund(sendCtx, req.Ticket, a.subjects)
		gate.release(sendCtx)
	}
	code, issued, subjects := a.code, a.issued, a.subjects
	res.VerificationID, res.VerificationStarted = issued.verification, issued.started
	res.Reason = gate.reason()
	if !issued.isNew {
		res.Reason = joinReasons("resend", res.Reason)
	}
	body, size, err := s.Messages.RenderSMS(text, phone.Country(), code)
	if err != nil {
		giveBack()
		return res, fmt.Errorf("render message: %w", err)
	}
	res.Segments = size.Segments
	if err := s.beforeText(sendCtx, req, phone, &res, issued, subjects); err != nil {
		gate.release(sendCtx)
		return res, err
	}
	receipt, err := s.Sender.Send(sendCtx, phone, body)
	if err != nil {
		var se *SendError
		if !errors.As(err, &se) {
			se = &SendError{Reason: "error", Err: err}
		}
		res.Receipt.Provider = se.Provider
		res.Reason = se.Reason
		if se.NotSent() {
			giveBack()
			if issued.isNew {
				// Nobody has this code: do not leave it pending.
				if err := s.Codes.Discard(sendCtx, phone.E164, issued.mac); err != nil {
					s.log.WarnContext(ctx, "discard unsent code", "err", err)
				}
			}
		}
		return res, providerError(err)
	}
	res.Receipt = receipt
	res.ExpiresIn = s.cfg.CodeTTL
	s.Pumping.Sent(phone)
	return res, nil
}

func (s *Service) refund(ctx context.Context, ticket string, subjects []Subject) {
	if err := s.Limiter.Refund(ctx, ticket, subjects); err != nil {
		// The request stays counted: the client is refused a little early,
		// never admitted past a limit.
		s.log.WarnContext(ctx, "refund failed; quota stays used", "err", err)
	}
}
