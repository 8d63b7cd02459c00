package console

import (
	"context"
	"time"

	"smsgw/otp"
)

// The console's needs, defined here where they are used; the composition
// root hands it the implementations (otp.Service, the code store, the audit
// reader, the pumping defence).

// Support shows and clears what the limits count for a phone or an IP;
// *otp.Service is one.
type Support interface {
	Limits(ctx context.Context, phone, ip string) (otp.SupportView, error)
	ResetLimits(ctx context.Context, phone, ip string) (otp.SupportView, error)
}

// Codes cancels a phone's pending code (E.164); it reports whether there
// was one. The code itself is never seen.
type Codes interface {
	Cancel(ctx context.Context, phone string) (bool, error)
}

// Audit searches and counts the audit trail (Postgres; nil in -dev).
type Audit interface {
	Search(ctx context.Context, q otp.AuditQuery) ([]otp.AuditEvent, error)
	Counts(ctx context.Context, since time.Time) ([]otp.AuditCount, error)
	Buckets(ctx context.Context, since time.Time, bucket time.Duration) ([]otp.AuditBucket, error)
}

// Pumping is what the console shows and changes of the pumping defence.
type Pumping interface {
	// Holds lists what the automatic rules hold back now, longest first.
	Holds(ctx context.Context) ([]Hold, error)
	// LiftHold ends one hold (by its Key) on every replica.
	LiftHold(ctx context.Context, key string) error
	// Budgets lists the ranges and networks counted against a budget,
	// fullest first, at most limit of them.
	Budgets(ctx context.Context, limit int) ([]Budget, error)
	// Overrides lists the operators' allow and block entries in force.
	Overrides(ctx context.Context) ([]Override, error)
	// AddOverride allows or blocks a number or a prefix until it expires,
	// replacing an entry for the same target.
	AddOverride(ctx context.Context, o Override) error
	// LiftOverride removes the entry for target.
	LiftOverride(ctx context.Context, target string) error
}

// Hold is one thing a pumping rule holds back: a country, a number range,
// a network.
type Hold struct {
	Key       string // what LiftHold takes, e.g. "country:GH", "range:+23324"
	Rule      string // the rule that tripped, as a 429's scope names it
	Remaining time.Duration
	Detail    string // why, in words: "412 texts, 3 approved"
}

// Budget is how much of its budget a range or network used.
type Budget struct {
	Key    string // e.g. "range:+23324", "net:203.0.113.0/24"
	Rule   string
	Used   int
	Limit  int
	Window time.Duration
}

// Override is an operator's decision about a number or a prefix, which
// wins over the automatic rules until it expires.
type Override struct {
	Target  string // E.164 number or prefix, e.g. "+233241234567" or "+23324"
	Action  string // "allow" or "block"
	Expires time.Time
	Note    string
}
