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

// Loop runs fn in n goroutines, each calling it over and over (w is the
// goroutine, i how many calls it made before) until stop is called. stop
// waits for them; the end of the test calls it if the test did not.
func Loop(t testing.TB, n int, fn func(w, i int)) (stop func()) {
	var (
		wg   sync.WaitGroup
		once sync.Once
	)
	done := make(chan struct{})
	for w := range n {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				fn(w, i)
			}
		})
	}
	stop = func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
	t.Cleanup(stop)
	return stop
}
