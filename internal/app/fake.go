package app

import (
	"errors"

	"smsgw/pumping"
)

// fakeWarning is logged at every start, and shown on /readyz and the
// console, while the fake provider serves outside -dev.
const fakeWarning = "sender: the fake provider is configured: texts go to nobody, and their codes are kept for " +
	"GET /v1/fake/messages (admin token only); name \"twilio\" or \"http\" in sender.provider for real texts"

// checkProviderNamed refuses to serve without -dev when the config names no
// provider: the fake one runs outside -dev only when named, so a forgotten
// provider never passes for working texts.
func checkProviderNamed(cfg *Config) error {
	if len(cfg.providerNames()) == 0 {
		return errors.New(`sender.provider: no SMS provider is configured; set "twilio" or "http" ` +
			`(or "fake", which texts nobody, for tests), or run with -dev`)
	}
	return nil
}

// fakeShadowNote is logged at start-up when fakeShadow chose shadow mode.
const fakeShadowNote = "pumping: shadow mode (counted, nothing refused): the fake provider texts nobody, so a hold " +
	"would protect no money; name [pumping] mode = \"enforce\" to see the rules refuse"

// fakeShadow is cfg with the pumping rules in shadow mode when the fake
// provider alone sends and the config names no mode, as under -dev: its
// texts cost nothing, and enforced rules only locked out the person trying
// the service (a neighbouring number held for a day after two sends).
func fakeShadow(cfg *Config) *Config {
	names := cfg.providerNames()
	if cfg.Pumping.Mode != "" || len(names) != 1 || names[0] != "fake" {
		return cfg
	}
	c := *cfg
	c.Pumping.Mode = pumping.ModeShadow
	c.shadowedForFake = true
	return &c
}
