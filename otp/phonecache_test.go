package otp_test

import (
	"testing"

	"smsgw/otp"
	"smsgw/otp/otptest"
)

// The flow parses a number once and asks the cache for it after: valid
// answers and refusals alike.
func TestPhoneAnswersRemembered(t *testing.T) {
	cache := &otptest.PhoneCache{}
	w := newWorld(t, func(_ *otp.Config, d *otp.Deps, _ *world) { d.Phones = cache })
	for range 2 {
		if _, err := w.send(t, sendReq(phone)); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		_, err := w.send(t, sendReq("+1 not a number"))
		wantCode(t, err, otp.EInvalidPhone)
	}
	if cache.Hits != 2 {
		t.Fatalf("%d cache hits, want 2: one for each number's second send", cache.Hits)
	}
}
