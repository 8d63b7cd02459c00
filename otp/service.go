package otp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"
)

// Config is what the send and verify flows need from configuration.
type Config struct {
	DefaultRegion string
	// IPv6Prefix is how many leading bits of an IPv6 client address are
	// counted as one client.
	IPv6Prefix int
	IPRules    []Rule
	PhoneRules []Rule
	CodeLength int
	CodeTTL    time.Duration
	// SendTimeout bounds the provider call and the refund after it. Both
	// outlive the client's request: once a text may go out, the flow finishes.
	SendTimeout time.Duration
}

// Service runs the send and verify flows over the interfaces it needs.
type Service struct {
	cfg     Config
	limiter Limiter
	sender  Sender
	log     *slog.Logger
}

// NewService returns a Service. It keeps no per-request state; one serves
// every request of the process.
func NewService(cfg Config, limiter Limiter, sender Sender, log *slog.Logger) *Service {
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = 10 * time.Second
	}
	return &Service{cfg: cfg, limiter: limiter, sender: sender, log: log}
}

// SendRequest is a validated-shape request to text a code.
type SendRequest struct {
	// Ticket is unique per request (never client-chosen): it is what the
	// limiter records, so two requests in the same microsecond both count.
	Ticket   string
	Phone    string
	Region   string
	Locale   string
	ClientIP netip.Addr
}

// SendResult is what happened to a send request. It is filled as far as the
// flow got, also when Send returns an error, so the caller can audit and set
// headers for refused requests.
type SendResult struct {
	Phone Phone
	// Decision is valid when Limited is true: the limiter was asked.
	Decision  Decision
	Limited   bool
	Receipt   Receipt
	ExpiresIn time.Duration
	// Reason is the audit reason: the refusing window, or the provider's.
	Reason string
}

// Send texts a code to the request's phone if every limit has room.
func (s *Service) Send(ctx context.Context, req SendRequest) (SendResult, error) {
	var res SendResult
	region := req.Region
	if region == "" {
		region = s.cfg.DefaultRegion
	}
	phone, err := ParsePhone(req.Phone, region)
	if err != nil {
		return res, err
	}
	res.Phone = phone

	subjects := s.SendSubjects(phone.E164, req.ClientIP)
	dec, err := s.limiter.Allow(ctx, req.Ticket, subjects)
	if err != nil {
		return res, &Error{Code: EUnavailable, Message: "the service is temporarily unavailable", Err: fmt.Errorf("limiter: %w", err)}
	}
	res.Decision, res.Limited = dec, true
	if !dec.Allowed {
		res.Reason = dec.Reason()
		return res, RateLimitedError(dec)
	}

	code, err := NewCode(s.cfg.CodeLength)
	if err != nil {
		s.refund(ctx, req.Ticket, subjects)
		return res, fmt.Errorf("generate code: %w", err)
	}
	body := "Your verification code is " + code

	// The text may go out from here on: finish even if the client leaves.
	sendCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.SendTimeout)
	defer cancel()
	receipt, err := s.sender.Send(sendCtx, phone.E164, body)
	if err != nil {
		var se *SendError
		if !errors.As(err, &se) {
			se = &SendError{Reason: "error", Err: err}
		}
		res.Receipt.Provider = se.Provider
		res.Reason = se.Reason
		if se.NotSent {
			s.refund(sendCtx, req.Ticket, subjects)
		}
		return res, &Error{Code: EProviderError, Message: "the SMS provider did not accept the text", Err: err}
	}
	res.Receipt = receipt
	res.ExpiresIn = s.cfg.CodeTTL
	return res, nil
}

// SendSubjects lists what a send is counted against, tightest first.
func (s *Service) SendSubjects(phoneE164 string, clientIP netip.Addr) []Subject {
	subjects := make([]Subject, 0, 2)
	if len(s.cfg.PhoneRules) > 0 {
		subjects = append(subjects, Subject{Scope: "phone", Key: "send:phone:" + phoneE164, Rules: s.cfg.PhoneRules})
	}
	if clientIP.IsValid() && len(s.cfg.IPRules) > 0 {
		subjects = append(subjects, Subject{Scope: "ip", Key: "send:ip:" + IPKey(clientIP, s.cfg.IPv6Prefix), Rules: s.cfg.IPRules})
	}
	return subjects
}

func (s *Service) refund(ctx context.Context, ticket string, subjects []Subject) {
	if err := s.limiter.Refund(ctx, ticket, subjects); err != nil {
		// The request stays counted: the client is refused a little early,
		// never admitted past a limit.
		s.log.WarnContext(ctx, "refund failed; quota stays used", "err", err)
	}
}

// RateLimitedError is the client error for a refused decision.
func RateLimitedError(dec Decision) *Error {
	w := dec.Tightest
	return &Error{
		Code: ERateLimited,
		Message: fmt.Sprintf("too many requests for this %s: at most %d per %s; retry in %d s",
			w.Scope, w.Rule.Max, w.Rule.Label(), dec.RetryAfterSeconds()),
		Fields: map[string]any{
			"scope":       w.Scope,
			"window":      w.Rule.Label(),
			"limit":       w.Rule.Max,
			"retry_after": dec.RetryAfterSeconds(),
		},
	}
}
