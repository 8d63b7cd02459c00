package otp

import (
	"net/netip"
	"time"
)

// AuditQuery selects audit rows for the operators' search; zero fields do not
// filter. Rows come newest first, at most Limit of them.
type AuditQuery struct {
	Phone     string // E.164
	IP        netip.Prefix
	RequestID string
	Outcome   string
	Kind      string
	From, To  time.Time // created_at in [From, To)
	Limit     int
}

// AuditCount is how many rows of one kind, outcome and reason were written
// since a moment, per destination country. Country is derived from one
// sample number of each calling-code range, so it is cheap to compute from
// Postgres; it is empty for rows without a phone.
type AuditCount struct {
	Kind, Outcome, Reason string
	Country               string
	Count                 int
}

// AuditBucket counts the rows of one kind and outcome in one time bucket, for
// the overview's charts.
type AuditBucket struct {
	Start         time.Time
	Kind, Outcome string
	Count         int
}
