package otp

import (
	"context"
	"net/netip"
)

// Stand-ins for parts that are missing, so no caller checks for nil and
// every answer says what is missing.

// NoAuditQueries reads audit rows where there is no database to read them
// from (dev mode prints them instead).
type NoAuditQueries struct{}

func (NoAuditQueries) Recent(context.Context, string, int) ([]AuditEvent, error) {
	return nil, Errorf(EUnavailable, "audit queries need Postgres; in -dev the audit log is printed to stderr")
}

// NoPumpingGuard decides no pumping rule: nothing is held, refused or
// counted. A service given no guard runs on it.
type NoPumpingGuard struct{}

func (NoPumpingGuard) Held(Phone, netip.Addr) (PumpingRefusal, bool) { return PumpingRefusal{}, false }

func (NoPumpingGuard) Reserve(context.Context, Phone, netip.Addr, bool) (PumpingReservation, error) {
	return PumpingReservation{}, nil
}

func (NoPumpingGuard) Release(context.Context, PumpingReservation) error { return nil }
func (NoPumpingGuard) Sent(Phone)                                        {}
func (NoPumpingGuard) Approved(context.Context, Phone) error             { return nil }

// NoOverrides holds no operator override.
type NoOverrides struct{}

func (NoOverrides) Lookup(string) (Override, bool) { return Override{}, false }

// NoChallenge offers no bot challenge: its widget names no provider, so a
// pumping rule's refusal stays a refusal.
type NoChallenge struct{}

func (NoChallenge) Verify(context.Context, string, netip.Addr) error {
	return Errorf(EUnavailable, "no bot challenge is configured")
}
func (NoChallenge) Widget() ChallengeWidget { return ChallengeWidget{} }
