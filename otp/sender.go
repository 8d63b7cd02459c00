package otp

import (
	"context"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Sender hands a text to an SMS provider. It gets the whole Phone so it can
// route by the number's country.
type Sender interface {
	Send(ctx context.Context, to Phone, body string) (Receipt, error)
}

// Receipt says which provider took a text and under what id, so delivery
// receipts can later be matched to the audit row.
type Receipt struct {
	Provider  string
	MessageID string
}

// Failure is what a provider's failure means, as a type: whether the text
// certainly did not go out (the quota is given back), whether another
// provider may be tried, and whether it speaks against the provider's health.
// Each provider sets it; the router and the send flow decide by it alone.
//
//	failure          text        another provider  provider's health
//	OutcomeUnknown   may arrive  no                counts
//	NumberProblem    not sent    yes               does not count
//	OptedOut         not sent    no (STOP)         does not count
//	ProviderRefused  not sent    yes               does not count
//	ProviderDown     not sent    yes               counts
type Failure int

const (
	// OutcomeUnknown: the request may have reached the provider (a timeout
	// after it was written): the text may still arrive, so the quota stays
	// used and no second provider texts the person. The zero value, so an
	// unclassified failure is taken the cautious way.
	OutcomeUnknown Failure = iota
	// NumberProblem: the provider will not text this number (invalid, not
	// mobile, region not enabled, unreachable).
	NumberProblem
	// OptedOut: the person told the provider STOP. No other provider may
	// text them either.
	OptedOut
	// ProviderRefused: the provider answered and refused the text for a
	// reason it did not name as the number's.
	ProviderRefused
	// ProviderDown: the provider failed before taking the text: unreachable,
	// answering 5xx itself, rejecting our credentials, rate limiting us, or
	// its breaker is open.
	ProviderDown
)

var failureNames = [...]string{"outcome_unknown", "number_problem", "opted_out", "provider_refused", "provider_down"}

func (f Failure) String() string {
	if f < 0 || int(f) >= len(failureNames) {
		return fmt.Sprintf("failure(%d)", int(f))
	}
	return failureNames[f]
}

// NotSent reports whether the text certainly did not go out.
func (f Failure) NotSent() bool { return f != OutcomeUnknown }

// FailOver reports whether another provider may be tried.
func (f Failure) FailOver() bool {
	return f == NumberProblem || f == ProviderRefused || f == ProviderDown
}

// AgainstProvider reports whether the failure speaks against the provider's
// health (its circuit breaker counts it).
func (f Failure) AgainstProvider() bool { return f == OutcomeUnknown || f == ProviderDown }

// SendError is a provider's failure to take a text. Providers return it (or
// wrap it) so the send flow and the router can act on its Failure.
type SendError struct {
	Provider string
	Failure  Failure
	// Reason is short and machine-readable ("refused", "invalid_number",
	// "timeout"); it becomes the audit row's reason.
	Reason string
	Err    error
}

// NotSent reports whether the text certainly did not go out.
func (e *SendError) NotSent() bool { return e.Failure.NotSent() }

func (e *SendError) Error() string {
	cause := "<nil>"
	if e.Err != nil {
		// The cause may quote the provider's answer: keep logs clean of
		// whatever it sent.
		cause = CleanProviderText(e.Err.Error(), 1024)
	}
	return fmt.Sprintf("provider %s: %s (%s): %s", e.Provider, e.Reason, e.Failure, cause)
}

func (e *SendError) Unwrap() error { return e.Err }

// MaxMessageID bounds a provider's message id (Twilio's are 34 characters).
const MaxMessageID = 255

// ValidMessageID reports whether a provider's message id may be stored and
// matched as it is: 1 to MaxMessageID printable ASCII characters, no spaces.
// Anything else (NUL, control or bidi characters, invalid UTF-8, a novel)
// is not an id a receipt could name.
func ValidMessageID(id string) bool {
	if id == "" || len(id) > MaxMessageID {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// CleanProviderText makes text a provider sent (an error message, a body
// quoted in an error) safe to log and store: valid UTF-8, no NUL, control or
// bidi-formatting characters (each becomes U+FFFD), at most max bytes.
func CleanProviderText(s string, max int) string {
	clean := func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return utf8.RuneError
		}
		return r
	}
	s = strings.Map(clean, strings.ToValidUTF8(s, string(utf8.RuneError)))
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
