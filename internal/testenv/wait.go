package testenv

import (
	"errors"
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
	if err := poll(d, func() error {
		if ok() {
			return nil
		}
		return errNotYet
	}); err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// WaitUntil is WaitFor for a wait whose failure is worth the last state
// seen: check says why it is not done yet, and the test fails with its last
// answer.
func WaitUntil(t testing.TB, d time.Duration, what string, check func() error) {
	t.Helper()
	if err := poll(d, check); err != nil {
		t.Fatalf("timed out waiting for %s: %v", what, err)
	}
}

var errNotYet = errors.New("not yet")

// poll calls check every 20 ms until it returns nil or d (WaitTimeout when
// 0) has passed, then returns its last error.
func poll(d time.Duration, check func() error) error {
	if d == 0 {
		d = WaitTimeout
	}
	deadline := time.Now().Add(d)
	for {
		err := check()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}
