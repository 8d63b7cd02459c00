package otp

import (
	"context"
	"fmt"
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

// SendError is a provider's failure to take a text. Senders return it (or
// wrap it) so the send flow can tell a refusal from an unknown outcome.
type SendError struct {
	Provider string
	// NotSent is true when the text certainly did not go out: the provider
	// refused it, or the request never reached the provider. The quota the
	// request took is then given back. When false the outcome is unknown (a
	// timeout after the request went out): the text may still arrive, so the
	// quota is kept.
	NotSent bool
	// Reason is short and machine-readable ("refused", "invalid_number",
	// "timeout"); it becomes the audit row's reason.
	Reason string
	Err    error
}

func (e *SendError) Error() string {
	outcome := "outcome unknown"
	if e.NotSent {
		outcome = "not sent"
	}
	return fmt.Sprintf("provider %s: %s (%s): %v", e.Provider, e.Reason, outcome, e.Err)
}

func (e *SendError) Unwrap() error { return e.Err }
