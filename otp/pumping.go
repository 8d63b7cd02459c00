package otp

import (
	"context"
	"time"
)

// PumpingGuard watches, per destination country, how many texts are sent and
// how many of their codes are approved over a sliding hour. SMS pumping (toll
// fraud) sends many texts nobody verifies; when a country's approval ratio
// falls below the threshold, the guard quarantines it.
type PumpingGuard interface {
	// Quarantined says whether texts to country are held back, and for how
	// much longer. It runs on every send, so it answers from memory.
	Quarantined(country string) (time.Duration, bool)
	// Sent counts a text sent to country, and quarantines the country when
	// its ratio trips the guard (in shadow mode it only logs and counts).
	Sent(ctx context.Context, country string) error
	// Approved counts an approved code for country.
	Approved(ctx context.Context, country string) error
}

// Quarantine is a country whose texts are held back.
type Quarantine struct {
	Country   string
	Remaining time.Duration
	// What tripped it: texts sent and codes approved in the hour before.
	Sends     int
	Approvals int
}

// Quarantines is the support desk's view of the pumping guard.
type Quarantines interface {
	List(ctx context.Context) ([]Quarantine, error)
	Lift(ctx context.Context, country string) error
}
