package otp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"
)

// Config is what the send and verify flows need from configuration.
type Config struct {
	DefaultRegion string
	// IPv6Prefix is how many leading bits of an IPv6 client address are
	// counted as one client.
	IPv6Prefix    int
	IPRules       []Rule
	PhoneRules    []Rule
	VerifyIPRules []Rule
	// Optional subjects, all decided in the same atomic step.
	CountryRules []Rule
	PrefixRules  []PrefixRules
	GlobalRules  []Rule
	Policy       PhonePolicy
	CodeLength   int
	CodeTTL      time.Duration
	MaxAttempts  int
	// SendTimeout bounds the provider call and the refund after it. Both
	// outlive the client's request: once a text may go out, the flow finishes.
	SendTimeout time.Duration
}

// Deps are the parts the flows run on.
type Deps struct {
	Limiter     Limiter
	Sender      Sender
	Codes       CodeStore
	Idempotency IdempotencyStore
	// Pumping may be nil: no guard.
	Pumping  PumpingGuard
	Secrets  *Secrets
	Messages *Messages
}

// PrefixRules are windows counted per leading Digits digits of the E.164
// number (one number range).
type PrefixRules struct {
	Digits int
	Rules  []Rule
}

// Service runs the send and verify flows over the interfaces it needs.
type Service struct {
	cfg Config
	Deps
	log    *slog.Logger
	phones *phoneCache
}

// NewService returns a Service. It keeps no per-request state; one serves
// every request of the process.
func NewService(cfg Config, deps Deps, log *slog.Logger) *Service {
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = 10 * time.Second
	}
	return &Service{cfg: cfg, Deps: deps, log: log, phones: newPhoneCache(1 << 16)}
}

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
	// IdempotencyKey, when set, makes a retry with the same key for the same
	// phone, within the code's lifetime, get the first answer again: no
	// second text, no second limit hit.
	IdempotencyKey string
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
	// Reason is the audit reason: the refusing window, the provider's,
	// "resend" when the pending code was texted again, or "idempotent_replay".
	Reason string
	// RequestID is the answered request's: the first one's on a replay.
	RequestID string
	// Replayed is true when this is the stored answer to an earlier request
	// with the same Idempotency-Key.
	Replayed bool
}

func unavailable(what string, err error) *Error {
	return &Error{Code: EUnavailable, Message: "the service is temporarily unavailable", Err: fmt.Errorf("%s: %w", what, err)}
}

func (s *Service) parsePhone(raw, region string) (Phone, error) {
	if region == "" {
		region = s.cfg.DefaultRegion
	}
	return s.phones.parse(raw, strings.ToUpper(region))
}

// Send texts a code to the request's phone if every limit has room. While a
// code is pending the same code is texted again, with its expiry renewed and
// its wrong attempts kept, so an earlier text still works and a resend never
// buys more guesses.
func (s *Service) Send(ctx context.Context, req SendRequest) (res SendResult, err error) {
	res.RequestID = req.RequestID
	phone, err := s.parsePhone(req.Phone, req.Region)
	if err != nil {
		return res, err
	}
	res.Phone = phone
	if reason := s.cfg.Policy.Refusal(phone); reason != "" {
		res.Reason = reason
		return res, notAllowed(reason)
	}

	if req.IdempotencyKey != "" && s.Idempotency != nil {
		scope := "send\x00" + phone.E164 + "\x00" + req.IdempotencyKey
		prior, cerr := s.claim(ctx, scope, req.Ticket)
		if cerr != nil {
			return res, cerr
		}
		if prior != nil {
			return replay(res, prior)
		}
		// res and err are the named results: settle sees the final answer.
		defer func() { s.settle(ctx, scope, req.Ticket, res, err) }()
	}

	if s.Pumping != nil {
		if wait, held := s.Pumping.Quarantined(phone.Country()); held {
			res.Reason = "pumping"
			return res, quarantined(wait)
		}
	}

	subjects := s.SendSubjects(phone, req.ClientIP)
	dec, err := s.Limiter.Allow(ctx, req.Ticket, subjects)
	if err != nil {
		return res, unavailable("limiter", err)
	}
	res.Decision, res.Limited = dec, true
	if !dec.Allowed {
		res.Reason = dec.Reason()
		return res, RateLimitedError(dec)
	}

	// From here the request holds quota: give it back if nothing is texted.
	// Once a text may go out, the flow finishes even if the client leaves.
	sendCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.SendTimeout)
	defer cancel()
	code, issued, err := s.issue(sendCtx, phone.E164)
	if err != nil {
		s.refund(sendCtx, req.Ticket, subjects)
		return res, err
	}
	if !issued.isNew {
		res.Reason = "resend"
	}
	body, err := s.Messages.Render(req.Locale, code)
	if err != nil {
		s.refund(sendCtx, req.Ticket, subjects)
		return res, fmt.Errorf("render message: %w", err)
	}
	receipt, err := s.Sender.Send(sendCtx, phone, body)
	if err != nil {
		var se *SendError
		if !errors.As(err, &se) {
			se = &SendError{Reason: "error", Err: err}
		}
		res.Receipt.Provider = se.Provider
		res.Reason = se.Reason
		if se.NotSent {
			s.refund(sendCtx, req.Ticket, subjects)
			if issued.isNew {
				// Nobody has this code: do not leave it pending.
				if err := s.Codes.Discard(sendCtx, phone.E164, issued.mac); err != nil {
					s.log.WarnContext(ctx, "discard unsent code", "err", err)
				}
			}
		}
		return res, &Error{Code: EProviderError, Message: "the SMS provider did not accept the text", Err: err}
	}
	res.Receipt = receipt
	res.ExpiresIn = s.cfg.CodeTTL
	if s.Pumping != nil {
		if err := s.Pumping.Sent(sendCtx, phone.Country()); err != nil {
			s.log.WarnContext(ctx, "pumping guard did not count a send", "err", err)
		}
	}
	return res, nil
}

// quarantined is the client error for a country the pumping guard holds
// back: a 429 like a full limit, naming the country as its scope.
func quarantined(wait time.Duration) *Error {
	secs := int64((wait + time.Second - 1) / time.Second)
	return &Error{
		Code:    ERateLimited,
		Message: fmt.Sprintf("texts to this country are paused for suspected SMS pumping; retry in %d s", secs),
		Fields:  map[string]any{"scope": "country", "window": WindowLabel(wait.Round(time.Second)), "limit": 0, "retry_after": secs},
	}
}

// claim takes the idempotency scope for this request, or returns the answer
// stored in it. While another request holds it, claim waits for that one to
// answer (at most as long as a send may take).
func (s *Service) claim(ctx context.Context, scope, ticket string) ([]byte, error) {
	hold := s.cfg.SendTimeout + 5*time.Second
	deadline := time.Now().Add(hold)
	for {
		state, answer, err := s.Idempotency.Claim(ctx, scope, ticket, hold)
		if err != nil {
			return nil, unavailable("idempotency", err)
		}
		switch state {
		case Claimed:
			return nil, nil
		case ClaimDone:
			return answer, nil
		}
		if time.Now().After(deadline) {
			return nil, Errorf(ERequestInProgress, "a request with this Idempotency-Key is still in progress; retry later")
		}
		select {
		case <-ctx.Done():
			return nil, unavailable("idempotency", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// storedSend is what an idempotency scope keeps of an accepted send.
type storedSend struct {
	RequestID string        `json:"request_id"`
	Provider  string        `json:"provider"`
	MessageID string        `json:"message_id"`
	ExpiresIn time.Duration `json:"expires_in"`
	Decision  Decision      `json:"decision"`
}

// settle stores an accepted send's answer; any other outcome lets a retry
// with the same key run afresh (a refused or failed send texted nobody).
func (s *Service) settle(ctx context.Context, scope, ticket string, res SendResult, err error) {
	ctx = context.WithoutCancel(ctx)
	var answer []byte
	if err == nil {
		answer, _ = json.Marshal(storedSend{RequestID: res.RequestID, Provider: res.Receipt.Provider,
			MessageID: res.Receipt.MessageID, ExpiresIn: res.ExpiresIn, Decision: res.Decision})
	}
	if serr := s.Idempotency.Settle(ctx, scope, ticket, answer, s.cfg.CodeTTL); serr != nil {
		s.log.WarnContext(ctx, "idempotency answer not stored", "err", serr)
	}
}

func replay(res SendResult, prior []byte) (SendResult, error) {
	var st storedSend
	if err := json.Unmarshal(prior, &st); err != nil {
		return res, fmt.Errorf("idempotency: stored answer: %w", err)
	}
	res.RequestID, res.Receipt = st.RequestID, Receipt{Provider: st.Provider, MessageID: st.MessageID}
	res.ExpiresIn, res.Decision, res.Limited = st.ExpiresIn, st.Decision, true
	res.Replayed, res.Reason = true, "idempotent_replay"
	return res, nil
}

// issuedCode says whether issue stored a new code, and which.
type issuedCode struct {
	isNew bool
	mac   []byte
}

// issue returns the code to text: the pending one, or a new one it stored.
func (s *Service) issue(ctx context.Context, phone string) (string, issuedCode, error) {
	code, err := NewCode(s.cfg.CodeLength)
	if err != nil {
		return "", issuedCode{}, fmt.Errorf("generate code: %w", err)
	}
	fresh, err := s.seal(phone, code)
	if err != nil {
		return "", issuedCode{}, err
	}
	pending, err := s.Codes.Issue(ctx, phone, fresh, s.cfg.CodeTTL)
	if err != nil {
		return "", issuedCode{}, unavailable("codes", err)
	}
	if pending == nil {
		return code, issuedCode{isNew: true, mac: fresh.MAC}, nil
	}
	old, err := s.Secrets.Open(phone, pending)
	if err == nil {
		return old, issuedCode{}, nil
	}
	// Sealed under a previous SMSGW_SECRET: its MAC cannot match any guess
	// either, so the new code takes its place (attempts kept).
	s.log.WarnContext(ctx, "pending code sealed under another secret; replacing it")
	if err := s.Codes.Replace(ctx, phone, fresh, s.cfg.CodeTTL); err != nil {
		return "", issuedCode{}, unavailable("codes", err)
	}
	return code, issuedCode{isNew: true, mac: fresh.MAC}, nil
}

func (s *Service) seal(phone, code string) (StoredCode, error) {
	sealed, err := s.Secrets.Seal(phone, code)
	if err != nil {
		return StoredCode{}, fmt.Errorf("seal code: %w", err)
	}
	return StoredCode{MAC: s.Secrets.MAC(phone, code), Sealed: sealed}, nil
}

// VerifyRequest is a validated-shape request to check a code.
type VerifyRequest struct {
	Ticket   string
	Phone    string
	Region   string
	Code     string
	ClientIP netip.Addr
}

// VerifyResult is what happened to a verify request, filled as far as the
// flow got.
type VerifyResult struct {
	Phone        Phone
	Decision     Decision
	Limited      bool
	AttemptsLeft int
	Reason       string
}

// Verify checks a guess against the phone's pending code. Compare, count,
// consume and lock out are one atomic step in the code store.
func (s *Service) Verify(ctx context.Context, req VerifyRequest) (VerifyResult, error) {
	var res VerifyResult
	code, err := NormalizeCode(req.Code)
	if err != nil {
		return res, err
	}
	phone, err := s.parsePhone(req.Phone, req.Region)
	if err != nil {
		return res, err
	}
	res.Phone = phone

	dec, err := s.Limiter.Allow(ctx, req.Ticket, s.VerifySubjects(req.ClientIP))
	if err != nil {
		return res, unavailable("limiter", err)
	}
	res.Decision, res.Limited = dec, true
	if !dec.Allowed {
		res.Reason = dec.Reason()
		return res, RateLimitedError(dec)
	}

	check, left, err := s.Codes.Check(ctx, phone.E164, s.Secrets.MAC(phone.E164, code), s.cfg.MaxAttempts)
	if err != nil {
		return res, unavailable("codes", err)
	}
	switch check {
	case CodeApproved:
		if s.Pumping != nil {
			if err := s.Pumping.Approved(ctx, phone.Country()); err != nil {
				s.log.WarnContext(ctx, "pumping guard did not count an approval", "err", err)
			}
		}
		return res, nil
	case CodeWrong:
		res.AttemptsLeft = left
		res.Reason = fmt.Sprintf("attempts_left:%d", left)
		if left == 0 {
			res.Reason = "locked_out"
		}
		return res, &Error{
			Code:    EInvalidCode,
			Message: invalidCodeMessage(left),
			Fields:  map[string]any{"attempts_left": left},
		}
	default:
		return res, Errorf(ENoPendingCode, "no code is pending for this phone: it was never sent, has expired, was used or too many wrong codes were tried")
	}
}

func invalidCodeMessage(left int) string {
	switch left {
	case 0:
		return "the code is wrong and that was the last attempt; request a new code"
	case 1:
		return "the code is wrong; 1 attempt left"
	default:
		return fmt.Sprintf("the code is wrong; %d attempts left", left)
	}
}

// maxCodeInput bounds what a client may send as a code.
const maxCodeInput = 32

// NormalizeCode accepts a code as people type or paste it ("123 456",
// "123-456") and returns its digits. Anything else is not a code at all.
func NormalizeCode(raw string) (string, error) {
	if len(raw) > maxCodeInput {
		return "", Errorf(EInvalidRequest, "code is too long")
	}
	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case '0' <= c && c <= '9':
			b.WriteByte(c)
		case c == ' ' || c == '-':
		default:
			return "", Errorf(EInvalidRequest, "code must be digits")
		}
	}
	if b.Len() == 0 {
		return "", Errorf(EInvalidRequest, "code is required")
	}
	return b.String(), nil
}

// SendSubjects lists what a send is counted against, tightest first: the
// phone, the client IP, and, when configured, the destination country, its
// number range and everything.
func (s *Service) SendSubjects(phone Phone, clientIP netip.Addr) []Subject {
	subjects := make([]Subject, 0, 2)
	subjects = append(subjects, s.phoneSubjects(phone.E164)...)
	subjects = append(subjects, s.sendIPSubjects(clientIP)...)
	if len(s.cfg.CountryRules) > 0 {
		subjects = append(subjects, Subject{Scope: "country", Key: "send:country:" + phone.Country(), Rules: s.cfg.CountryRules})
	}
	for _, p := range s.cfg.PrefixRules {
		digits := phone.E164[1:]
		if len(digits) > p.Digits {
			digits = digits[:p.Digits]
		}
		subjects = append(subjects, Subject{Scope: "prefix", Key: "send:prefix:" + digits, Rules: p.Rules})
	}
	if len(s.cfg.GlobalRules) > 0 {
		subjects = append(subjects, Subject{Scope: "global", Key: "send:global", Rules: s.cfg.GlobalRules})
	}
	return subjects
}

func (s *Service) phoneSubjects(e164 string) []Subject {
	if len(s.cfg.PhoneRules) == 0 {
		return nil
	}
	return []Subject{{Scope: "phone", Key: "send:phone:" + e164, Rules: s.cfg.PhoneRules}}
}

func (s *Service) sendIPSubjects(clientIP netip.Addr) []Subject {
	if !clientIP.IsValid() || len(s.cfg.IPRules) == 0 {
		return nil
	}
	return []Subject{{Scope: "ip", Key: "send:ip:" + IPKey(clientIP, s.cfg.IPv6Prefix), Rules: s.cfg.IPRules}}
}

// VerifySubjects lists what a verify is counted against: the client IP, under
// its own budget apart from sends.
func (s *Service) VerifySubjects(clientIP netip.Addr) []Subject {
	if !clientIP.IsValid() || len(s.cfg.VerifyIPRules) == 0 {
		return nil
	}
	return []Subject{{Scope: "ip", Key: "verify:ip:" + IPKey(clientIP, s.cfg.IPv6Prefix), Rules: s.cfg.VerifyIPRules}}
}

func (s *Service) refund(ctx context.Context, ticket string, subjects []Subject) {
	if err := s.Limiter.Refund(ctx, ticket, subjects); err != nil {
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
