package testenv

import (
	"sync/atomic"
	"testing"
)

func TestLoopStopsEveryWorker(t *testing.T) {
	var calls [4]atomic.Int64
	stop := Loop(t, len(calls), func(w, i int) {
		if n := calls[w].Add(1); n != int64(i)+1 {
			t.Errorf("worker %d: call %d numbered %d", w, n, i)
		}
	})
	WaitFor(t, 0, "every worker to run", func() bool {
		for i := range calls {
			if calls[i].Load() == 0 {
				return false
			}
		}
		return true
	})
	stop()
	var before int64
	for i := range calls {
		before += calls[i].Load()
	}
	stop() // a second stop, and the test's end, are harmless
	var after int64
	for i := range calls {
		after += calls[i].Load()
	}
	if after != before {
		t.Fatalf("%d calls after stop returned", after-before)
	}
}

func TestRaceCountsOutcomes(t *testing.T) {
	got := Race(t, 10, func(i int) string {
		if i%2 == 0 {
			return "even"
		}
		return "odd"
	})
	if got["even"] != 5 || got["odd"] != 5 {
		t.Fatalf("outcomes %v", got)
	}
}
