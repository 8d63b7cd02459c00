package otp

import (
	"reflect"
	"testing"
	"time"
)

// A remembered refusal's shared error is what RateLimitedError makes of
// the decision, for every window and wait, and one error serves the
// refusals of one window in one second.
func TestRateLimitedHeldIsRateLimitedError(t *testing.T) {
	phone := Window{Scope: "phone", Rule: Rule{Window: time.Minute, Max: 1}}
	ip := Window{Scope: "ip", Rule: Rule{Window: time.Hour, Max: 50}}
	key := Window{Scope: KeyScope, Name: "account", Rule: Rule{Window: time.Minute, Max: 1}}
	var decisions []Decision
	for _, w := range []Window{phone, phone, ip, key, key, phone} {
		for _, wait := range []time.Duration{42*time.Second + 1, 42 * time.Second, 41*time.Second + 5, 3599 * time.Second} {
			w.Reset = wait
			decisions = append(decisions, Decision{Tightest: w, RetryAfter: wait})
		}
	}
	var held heldErrors
	for i, d := range decisions {
		got, reason := held.rateLimited(d)
		if want := RateLimitedError(d); !reflect.DeepEqual(got, want) || reason != d.Reason() {
			t.Fatalf("decision %d: %+v %q, want %+v %q", i, got, reason, want, d.Reason())
		}
	}
	a, _ := held.rateLimited(decisions[1])
	if b, _ := held.rateLimited(decisions[2]); a != b {
		t.Fatal("one window's refusals in one second got two errors")
	}
}
