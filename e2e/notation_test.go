package e2e

import (
	"strings"
	"testing"
)

// TestZeroZeroPrefix: "00 44 …" is international even where the default
// region (US) dials abroad with 011; a number that is not valid either way
// gets an error saying how to write it.
func TestZeroZeroPrefix(t *testing.T) {
	t.Parallel()
	p := startDev(t, "")
	if r := post(t, p.URL+"/v1/otp/send", `{"phone": "00 44 7400 123456"}`, nil); r.Status != 202 || r.Body["phone"] != "+447400123456" {
		t.Fatalf("00 44: %d %s", r.Status, r.Raw)
	}
	r := post(t, p.URL+"/v1/otp/send", `{"phone": "00 44 20 7946 095"}`, nil)
	msg, _ := r.ErrorField("message").(string)
	if r.Status != 400 || r.ErrorCode() != "invalid_phone" || !strings.Contains(msg, `"+44 7400 123456"`) || !strings.Contains(msg, `"region"`) {
		t.Fatalf("invalid: %d %s", r.Status, r.Raw)
	}
}
