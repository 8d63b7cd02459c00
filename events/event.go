// Package events tells backends what happened, as signed webhooks (SPEC
// "Events (webhooks)"): an event is written to a Postgres outbox in the
// transaction that changed what it tells, then delivered by a loop of its
// own, at least once and once per deployment, retried with backoff, kept as
// failed when it never got through, and pruned once delivered and old.
package events

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/google/uuid"
)

// Event types (SPEC "Events (webhooks)").
const (
	VerificationSent        = "verification.sent"
	VerificationDelivered   = "verification.delivered"
	VerificationUndelivered = "verification.undelivered"
	VerificationApproved    = "verification.approved"
	VerificationExpired     = "verification.expired"
	VerificationFailed      = "verification.failed"
	VerificationCanceled    = "verification.canceled"
	PumpingRestricted       = "pumping.restricted"
	PumpingLifted           = "pumping.lifted"
)

// Types lists every event type, for config validation.
var Types = []string{VerificationSent, VerificationDelivered, VerificationUndelivered, VerificationApproved,
	VerificationExpired, VerificationFailed, VerificationCanceled, PumpingRestricted, PumpingLifted}

// KnownType reports whether t is an event type.
func KnownType(t string) bool { return slices.Contains(Types, t) }

// Event is one thing that happened. Its ID is the webhook-id of every
// delivery of it, so a receiver can drop a duplicate.
type Event struct {
	ID   string
	Type string
	Time time.Time
	Data any // marshalled as the body's "data"
}

// New returns an event of type typ with a fresh id.
func New(typ string, at time.Time, data any) Event {
	return Event{ID: "evt_" + uuid.Must(uuid.NewV7()).String(), Type: typ, Time: at.UTC(), Data: data}
}

// body is what a receiver gets.
type body struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      any       `json:"data"`
}

// Body is the event's JSON body, as stored and as delivered.
func (e Event) Body() ([]byte, error) {
	return json.Marshal(body{Type: e.Type, Timestamp: e.Time, Data: e.Data})
}

// VerificationData is the data of a verification.* event: never the code.
type VerificationData struct {
	VerificationID string  `json:"verification_id"`
	Phone          string  `json:"phone"`
	Country        string  `json:"country"`
	Status         string  `json:"status"`
	DeliveryStatus *string `json:"delivery_status"`
	APIKey         string  `json:"api_key"`
	RequestID      string  `json:"request_id"`
}

// PumpingData is the data of a pumping.* event.
type PumpingData struct {
	Rule    string    `json:"rule"`
	Subject string    `json:"subject"`
	Since   time.Time `json:"since"`
	Why     string    `json:"why"`
}
