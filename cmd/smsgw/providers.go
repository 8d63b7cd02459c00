package main

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"smsgw/api"
	"smsgw/sender"
	"smsgw/sender/fake"
	"smsgw/sender/gateway"
	"smsgw/sender/twilio"
)

// providers builds the configured SMS providers, in order, and what the API
// needs of them: the fake outbox (nil unless "fake" is used) and Twilio's
// delivery receipt webhook (nil unless Twilio has a status callback URL).
type providers struct {
	router *sender.Router
	outbox *fake.Provider
	twilio *api.TwilioWebhook
}

func buildProviders(cfg *Config, sec secrets, onText func(fake.Message), reg prometheus.Registerer) (providers, error) {
	var out providers
	var named []sender.Named
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
				AccountSID: sec.twilioSID, AuthToken: sec.twilioToken,
				From: tc.From, MessagingServiceSID: tc.MessagingServiceSID,
				APIBase: tc.APIBase, StatusCallbackURL: tc.StatusCallbackURL, Timeout: timeout,
			})
			if err != nil {
				return out, err
			}
			p = tp
			if tc.StatusCallbackURL != "" {
				out.twilio = &api.TwilioWebhook{AuthToken: sec.twilioToken, CallbackURL: tc.StatusCallbackURL}
			}
		case "http":
			gp, err := gateway.New(gateway.Config{URL: cfg.Sender.HTTP.URL, Secret: sec.httpSecret, Timeout: timeout}, nil)
			if err != nil {
				return out, err
			}
			p = gp
		default:
			return out, fmt.Errorf("sender.providers: unknown provider %q", name)
		}
		named = append(named, sender.Named{Name: name, Provider: p})
	}
	router, err := sender.NewRouter(named, sender.Options{
		Routes:          cfg.Sender.Routes,
		BreakerFailures: uint32(cfg.Sender.Breaker.Failures),
		BreakerOpenFor:  cfg.Sender.Breaker.OpenFor.Duration,
		Metrics:         reg,
	})
	out.router = router
	return out, err
}
