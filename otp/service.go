package otp

import (
	"log/slog"
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
	// KeyRules are the caller-defined limit keys ([[limits.key]]).
	KeyRules    []KeyRules
	Policy      PhonePolicy
	CodeLength  int
	CodeTTL     time.Duration
	MaxAttempts int
	// SendTimeout bounds the provider call and the refund after it. Both
	// outlive the client's request: once a text may go out, the flow finishes.
	SendTimeout time.Duration
	// TestNumbers are never texted and consume nothing; their codes are
	// fixed. Validate them with ValidateTestNumbers.
	TestNumbers []TestNumber
}

// Deps are the parts the flows run on. A part that is turned off is a
// no-op implementation, never nil.
type Deps struct {
	Limiter     Limiter
	Sender      Sender
	Codes       CodeStore
	Idempotency IdempotencyStore
	// AuditLog is where a send's row is made durable, as sending, before
	// any text: required, since no text goes out without its row.
	AuditLog AuditLog
	// Admitter does a send's idempotency claim, windows, pumping
	// reservation and code issue in one step: required.
	Admitter SendAdmitter
	// Pumping, Overrides and Challenge left nil get their stand-ins
	// (NoPumpingGuard, NoOverrides, NoChallenge: no guard, no override, a
	// rule's refusal stays a refusal), so the flows never check for nil.
	Pumping   PumpingGuard
	Overrides Overrides
	Challenge ChallengeVerifier
	Secrets   *Secrets
	Messages  *Messages
	// Verifications keeps each code's verification record and its events;
	// left nil, NoVerifications.
	Verifications Verifications
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
	log      *slog.Logger
	subjects []sendSubject
	// testCodes maps test numbers to their fixed codes.
	testCodes map[string]string
	// phones remembers the numbers parsed (phonecache.go).
	phones *phoneCache
	// heldErrors shares a remembered refusal's error (refusals.go).
	heldErrors heldErrors
}

// NewService returns a Service. It keeps no per-request state; one serves
// every request of the process.
func NewService(cfg Config, deps Deps, log *slog.Logger) *Service {
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = 10 * time.Second
	}
	if deps.AuditLog == nil {
		panic("otp: NewService needs Deps.AuditLog: no text goes out without its row")
	}
	if deps.Admitter == nil {
		panic("otp: NewService needs Deps.Admitter: every send is admitted through it")
	}
	if deps.Pumping == nil {
		deps.Pumping = NoPumpingGuard{}
	}
	if deps.Overrides == nil {
		deps.Overrides = NoOverrides{}
	}
	if deps.Challenge == nil {
		deps.Challenge = NoChallenge{}
	}
	if deps.Verifications == nil {
		deps.Verifications = NoVerifications{}
	}
	codes := make(map[string]string, len(cfg.TestNumbers))
	for _, tn := range cfg.TestNumbers {
		codes[tn.Phone] = tn.Code
	}
	return &Service{cfg: cfg, Deps: deps, log: log, subjects: sendSubjects(cfg), testCodes: codes,
		phones: newPhoneCache(phoneCacheEntries)}
}

func (s *Service) parsePhone(raw, region string) (Phone, error) {
	if region == "" {
		region = s.cfg.DefaultRegion
	}
	region = strings.ToUpper(region)
	if p, ok := s.phones.get(raw, region); ok {
		return p.phone, p.err
	}
	p, err := ParsePhone(raw, region)
	s.phones.put(raw, region, parsedPhone{p, err})
	return p, err
}
