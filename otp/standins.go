package otp

import "context"

// Stand-ins for parts that are missing, so no caller checks for nil and
// every answer says what is missing.

// NoAuditQueries reads audit rows where there is no database to read them
// from (dev mode prints them instead).
type NoAuditQueries struct{}

func (NoAuditQueries) Recent(context.Context, string, int) ([]AuditEvent, error) {
	return nil, Errorf(EUnavailable, "audit queries need Postgres; in -dev the audit log is printed to stderr")
}
