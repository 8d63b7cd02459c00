package app

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"smsgw/sender"
	"smsgw/sender/fake"
	"smsgw/sender/gateway"
	"smsgw/sender/twilio"
)

// providers are the configured SMS providers and the ones whose HTTP
// endpoints the root mounts: the fake outbox (nil unless "fake" is used) and
// Twilio (nil unless used), whose delivery receipts come back over HTTP.
type providers struct {
	named  []sender.Named
	outbox *fake.Provider
	twilio *twilio.Provider
}

// buildProviders makes the configured providers, in order, checking their
// settings and secrets before anything connects.
func buildProviders(cfg *Config, sec Secrets, onText func(fake.Message)) (providers, error) {
	var out providers
	timeout := cfg.Sender.Timeout.Duration
	for _, name := range cfg.providerNames() {
		var p sender.Provider
		switch name {
		case "fake":
			out.outbox = fake.New(cfg.Sender.Fake.OutboxSize, cfg.Sender.Fake.FailPrefixes, onText)
			p = out.outbox
		case "twilio":
			tc := cfg.Sender.Twilio
			tp, err := twilio.New(twilio.Config{
				AccountSID: sec.TwilioSID, AuthToken: sec.TwilioToken,
				From: tc.From, MessagingServiceSID: tc.MessagingServiceSID,
				APIBase: tc.APIBase, StatusCallbackURL: tc.StatusCallbackURL, Timeout: timeout,
			})
			if err != nil {
				return out, err
			}
			p, out.twilio = tp, tp
		case "http":
			gp, err := gateway.New(gateway.Config{URL: cfg.Sender.HTTP.URL, Secret: sec.HTTPSecret, Timeout: timeout}, nil)
			if err != nil {
				return out, err
			}
			p = gp
		default:
			return out, fmt.Errorf("sender.providers: unknown provider %q", name)
		}
		out.named = append(out.named, sender.Named{Name: name, Provider: p})
	}
	return out, nil
}

func newRouter(cfg *Config, named []sender.Named, reg prometheus.Registerer) (*sender.Router, error) {
	return sender.NewRouter(named, sender.Options{
		Routes:          cfg.Sender.Routes,
		BreakerFailures: uint32(cfg.Sender.Breaker.Failures),
		BreakerOpenFor:  cfg.Sender.Breaker.OpenFor.Duration,
		Metrics:         reg,
	})
}
