package client_test

import (
	"slices"
	"testing"

	"smsgw/client"
	"smsgw/events"
)

// The client names the event types itself, so that a backend importing it
// pulls in none of the server; this holds the two lists equal.
func TestEventTypesMatchTheServer(t *testing.T) {
	ours := []string{client.VerificationSent, client.VerificationDelivered, client.VerificationUndelivered,
		client.VerificationApproved, client.VerificationExpired, client.VerificationFailed,
		client.VerificationCanceled, client.PumpingRestricted, client.PumpingLifted}
	theirs := slices.Clone(events.Types)
	slices.Sort(ours)
	slices.Sort(theirs)
	if !slices.Equal(ours, theirs) {
		t.Fatalf("client event types %v, server %v", ours, theirs)
	}
}
