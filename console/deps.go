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

// Keys looks up and resets the windows of one value of a caller-defined
// limit key ([[limits.key]]); *otp.Service is one.
type Keys interface {
	LimitKeyNames() []string
	KeyLimits(ctx context.Context, name, value string, reset bool) (otp.SupportView, error)
}
