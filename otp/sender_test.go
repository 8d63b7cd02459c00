package otp_test

import (
	"errors"
	"strings"
	"testing"

	"smsgw/otp"
)

// Each failure says what the flow and the router do with it, as the table
// on otp.Failure states.
func TestFailureTable(t *testing.T) {
	for _, c := range []struct {
		f                          otp.Failure
		name                       string
		notSent, failOver, against bool
	}{
		{otp.OutcomeUnknown, "outcome_unknown", false, false, true},
		{otp.NumberProblem, "number_problem", true, true, false},
		{otp.OptedOut, "opted_out", true, false, false},
		{otp.ProviderRefused, "provider_refused", true, true, false},
		{otp.ProviderDown, "provider_down", true, true, true},
	} {
		if c.f.String() != c.name || c.f.NotSent() != c.notSent || c.f.FailOver() != c.failOver || c.f.AgainstProvider() != c.against {
			t.Errorf("%v: not sent %v, fail over %v, against the provider %v; want %s %v %v %v",
				c.f, c.f.NotSent(), c.f.FailOver(), c.f.AgainstProvider(), c.name, c.notSent, c.failOver, c.against)
		}
	}
	if s := otp.Failure(9).String(); s != "failure(9)" {
		t.Errorf("an unknown failure prints %q", s)
	}
}

// A provider's error keeps its cause for errors.Is and logs it cleaned.
func TestSendErrorCleansItsCause(t *testing.T) {
	cause := errors.New("bad\x00number\u202e")
	err := &otp.SendError{Provider: "twilio", Failure: otp.NumberProblem, Reason: "invalid_number", Err: cause}
	if !errors.Is(err, cause) || !err.NotSent() {
		t.Fatalf("%v: not unwrapped or not marked not sent", err)
	}
	if got, want := err.Error(), "provider twilio: invalid_number (number_problem): bad\uFFFDnumber\uFFFD"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	if got := (&otp.SendError{Provider: "p", Reason: "timeout"}).Error(); !strings.HasSuffix(got, ": <nil>") {
		t.Fatalf("Error() without a cause = %q", got)
	}
}

func TestValidMessageID(t *testing.T) {
	for id, want := range map[string]bool{
		"SM0123456789abcdef0123456789abcdef":    true,
		"":                                      false,
		"has space":                             false,
		"nul\x00":                               false,
		"é":                                     false,
		strings.Repeat("a", otp.MaxMessageID):   true,
		strings.Repeat("a", otp.MaxMessageID+1): false,
	} {
		if otp.ValidMessageID(id) != want {
			t.Errorf("ValidMessageID(%.20q) = %v, want %v", id, !want, want)
		}
	}
}

// Provider text is valid UTF-8 without control or bidi characters, cut at a
// rune boundary.
func TestCleanProviderText(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"ok", 10, "ok"},
		{"a\x01b\xffc", 10, "a\uFFFDb\uFFFDc"},
		{"ééé", 3, "é"}, // 6 bytes: the cut backs off to a whole rune
	} {
		if got := otp.CleanProviderText(c.in, c.max); got != c.want {
			t.Errorf("CleanProviderText(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}
