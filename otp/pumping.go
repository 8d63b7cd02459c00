package otp

import (
	"context"
	"net/netip"
	"time"
)

// PumpingGuard defends the money against SMS pumping (toll fraud): texts to
// number ranges whose termination fees an attacker shares, asked for from
// addresses rotated by the thousand, verified by nobody. It keeps budgets of
// unverified texts per number range, country and client network, earned by
// the codes each one gets approved, and a money ceiling.
type PumpingGuard interface {
	// Held answers from memory whether a rule already refused a subject of
	// this send and still does. It runs before anything touches Redis, so a
	// flood on a held range costs no Redis call.
	Held(phone Phone, ip netip.Addr) (PumpingRefusal, bool)
	// Reserve decides the rules for a send and counts it when they pass
	// (in shadow mode: always, reporting what would have refused). With
	// bypass the pumping rules are not decided (a solved challenge), only
	// the money ceiling.
	Reserve(ctx context.Context, phone Phone, ip netip.Addr, bypass bool) (PumpingReservation, error)
	// Release takes back a reservation whose text was never sent.
	Release(ctx context.Context, r PumpingReservation) error
	// Sent reports a reserved text the provider accepted, for the metrics.
	Sent(phone Phone)
	// Approved credits an approved code to the subjects its text counted in.
	Approved(ctx context.Context, phone Phone) error
}

// PumpingRefusal is a pumping rule's refusal.
type PumpingRefusal struct {
	// Rule is the rule's name, e.g. "range_1k", "net_48", "spend_24h".
	Rule string
	// Scope is the rule's family as a refusal names it: "range",
	// "country", "network" or "spend".
	Scope string
	// Subject is what it counted, e.g. "+4479111234xxx", "2001:db8::/48".
	Subject string
	// Used and Limit are the subject's unverified texts and its budget
	// (money in the currency's units for spend).
	Used, Limit float64
	Window      time.Duration
	RetryAfter  time.Duration
}

// Reason is the audit reason: "pumping:range_1k".
func (r PumpingRefusal) Reason() string { return "pumping:" + r.Rule }

// PumpingReservation is a send the guard counted, or refused.
type PumpingReservation struct {
	// Refused is set when a rule refused the send (nothing was counted).
	Refused *PumpingRefusal
	// Shadow is set in shadow mode when a rule would have refused it.
	Shadow *PumpingRefusal
	// Ticket is the guard's own record of what to take back on Release.
	Ticket any
}

// OverrideAction is what an operator's override does.
type OverrideAction string

// Override actions.
const (
	// OverrideAllow exempts a number or range from the pumping rules and the
	// spend ceiling, never from the per-phone and per-IP windows.
	OverrideAllow OverrideAction = "allow"
	// OverrideBlock refuses a number or range (422 phone_not_allowed).
	OverrideBlock OverrideAction = "block"
)

// Override is an operator's decision about a number ("+447911123456") or a
// range (any shorter E.164 prefix, "+4479111"), until it expires.
type Override struct {
	Target    string         `json:"target"`
	Action    OverrideAction `json:"action"`
	Note      string         `json:"note"`
	ExpiresAt time.Time      `json:"expires_at"`
	CreatedAt time.Time      `json:"created_at"`
}

// Overrides answers, from memory, the override that applies to a number:
// the longest target that prefixes it and has not expired.
type Overrides interface {
	Lookup(e164 string) (Override, bool)
}

// PumpingHold is a subject a rule refuses now, or one near its budget.
type PumpingHold struct {
	Rule    string
	Subject string
	Used    float64
	Limit   float64
	// Remaining is how long a hold lasts if nothing is approved, or how long
	// a near subject stays listed.
	Remaining time.Duration
	// Restricted is set for a country in the restricted state.
	Restricted *CountryRestriction
}

// CountryRestriction is a country whose texts carrying no sign of a real
// user ran over what they earned: only sends with such a sign (a returning
// number, an approving network, a solved challenge) are served.
type CountryRestriction struct {
	Since, Until time.Time
	// Abroad is set when only the sends from networks known for real users
	// of other countries are restricted: the country's own are served.
	Abroad bool
	// Unverified and Budget are what tripped it, over the window, or over
	// the last hour when Hour is set.
	Unverified, Budget float64
	Hour               bool
	// Refused counts the sends refused (or asked for a challenge) since;
	// the others the sends served by each sign.
	Refused, ServedReturning, ServedNetwork, ServedChallenge int64
}

// PumpingAdmin is the operators' view of the guard: what it holds, what is
// close, the overrides, and lifting a hold (which forgets the subject's
// counts on every replica).
type PumpingAdmin interface {
	Holds(ctx context.Context) (held, near []PumpingHold, err error)
	Lift(ctx context.Context, rule, subject string) error
	ListOverrides(ctx context.Context) ([]Override, error)
	SetOverride(ctx context.Context, o Override) error
	DeleteOverride(ctx context.Context, target string) error
}

// ChallengeVerifier checks a bot-challenge token (Turnstile, hCaptcha,
// reCAPTCHA) with its vendor. A send a pumping rule would refuse asks for one
// instead, and passes the pumping rules (never the windows) with it.
type ChallengeVerifier interface {
	// Verify is nil when the vendor accepted the token; a *ChallengeRejected
	// when it refused it; another error when it could not be asked.
	Verify(ctx context.Context, token string, remoteIP netip.Addr) error
	// Widget is what a frontend needs to show the challenge.
	Widget() ChallengeWidget
}

// ChallengeWidget names the vendor and the public site key.
type ChallengeWidget struct {
	Provider string `json:"provider"`
	SiteKey  string `json:"site_key"`
}

// ChallengeRejected is the vendor's refusal of a token.
type ChallengeRejected struct {
	Codes []string // the vendor's error codes, e.g. "invalid-input-response"
}

func (e *ChallengeRejected) Error() string {
	if len(e.Codes) == 0 {
		return "challenge token rejected"
	}
	return "challenge token rejected: " + e.Codes[0]
}
