package otp

import (
	"strings"
	"testing"
	"time"
)

func TestWaitInWords(t *testing.T) {
	for secs, want := range map[int64]string{
		0: "1 second", 1: "1 second", 43: "43 seconds", 89: "89 seconds", 90: "about 2 minutes",
		600: "about 10 minutes", 5399: "about 90 minutes", 5400: "about 2 hours", 84920: "about 24 hours",
		3 * 86400: "about 3 days",
	} {
		if got := waitInWords(secs); got != want {
			t.Errorf("waitInWords(%d) = %q, want %q", secs, got, want)
		}
	}
}

// A pumping 429 says the wait in words and how an operator lifts the hold.
func TestPumpingRefusalSaysTheWaitAndTheLift(t *testing.T) {
	e := pumpingRefused(PumpingRefusal{Rule: "range_100", Scope: "range", RetryAfter: 84920 * time.Second, Window: 24 * time.Hour})
	for _, want := range []string{"retry in about 24 hours (84920 s)", "Reset limits", "DELETE /v1/admin/limits?phone=<number>&pumping=true"} {
		if !strings.Contains(e.Message, want) {
			t.Errorf("message %q lacks %q", e.Message, want)
		}
	}
	if e.RetryAfter != 84920 {
		t.Errorf("RetryAfter %d, want 84920", e.RetryAfter)
	}
}
