package app

import "errors"

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
