package testenv

import (
	"testing"
	"time"
)

// WaitTimeout is how long WaitFor waits: sized for a loaded machine running
// -race, never a measure of speed.
const WaitTimeout = 30 * time.Second

// WaitFor polls ok until it holds, failing the test with what it waited for
// once d has passed (WaitTimeout when d is 0). Tests wait for events this
// way, never with a fixed sleep.
func WaitFor(t testing.TB, d time.Duration, what string, ok func() bool) {
	t.Helper()
	if d == 0 {
		d = WaitTimeout
	}
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
