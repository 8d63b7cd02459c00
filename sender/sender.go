// Package sender turns SMS providers into the otp.Sender the send flow uses.
// Providers live in packages named after what they wrap (sender/fake,
// sender/twilio).
package sender

import (
	"context"
	"errors"

	"smsgw/otp"
)

// Provider is one SMS gateway. An error that certainly means "nothing was
// sent" must be an *otp.SendError with NotSent set; any other error is an
// unknown outcome.
type Provider interface {
	Send(ctx context.Context, to, body string) (messageID string, err error)
}

// Named is a provider with the name it has in configuration and the audit log.
type Named struct {
	Name     string
	Provider Provider
}

// Router is an otp.Sender over providers tried in order. It moves on to the
// next provider only when the previous one certainly sent nothing: after an
// unknown outcome a second text could reach the person twice.
type Router struct {
	providers []Named
}

// NewRouter returns a Router over providers, in order of preference.
func NewRouter(providers ...Named) *Router { return &Router{providers: providers} }

// Send hands the text to the first provider that takes it.
func (r *Router) Send(ctx context.Context, to otp.Phone, body string) (otp.Receipt, error) {
	var last error
	for _, p := range r.providers {
		id, err := p.Provider.Send(ctx, to.E164, body)
		if err == nil {
			return otp.Receipt{Provider: p.Name, MessageID: id}, nil
		}
		var se *otp.SendError
		if !errors.As(err, &se) {
			se = &otp.SendError{Reason: "error", Err: err}
		} else {
			c := *se
			se = &c
		}
		se.Provider = p.Name
		last = se
		if !se.NotSent {
			return otp.Receipt{}, se
		}
	}
	if last == nil {
		last = &otp.SendError{NotSent: true, Reason: "no_provider", Err: errors.New("no provider configured")}
	}
	return otp.Receipt{}, last
}
