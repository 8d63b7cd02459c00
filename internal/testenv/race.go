package testenv

import (
	"sync"
	"testing"
)

// Race starts n goroutines, releases them together at a gate so that they
// really race, and counts what each returned (its outcome, e.g. "202").
// fn may call t.Error, not t.Fatal (it runs off the test's goroutine).
func Race(t testing.TB, n int, fn func(i int) string) map[string]int {
	t.Helper()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		outcomes = map[string]int{}
	)
	gate := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-gate
			out := fn(i)
			mu.Lock()
			outcomes[out]++
			mu.Unlock()
		})
	}
	close(gate)
	wg.Wait()
	return outcomes
}
