package testenv

import (
	"os"
	"slices"
	"strconv"
	"testing"
)

// BenchRounds is SMSGW_BENCH_ROUNDS, how many interleaved rounds a
// benchmark comparing with baselines runs (def when unset): the shared
// machine drifts from minute to minute, so each round compares within
// itself and the median over rounds is reported.
func BenchRounds(tb testing.TB, def int) int {
	tb.Helper()
	s := os.Getenv("SMSGW_BENCH_ROUNDS")
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		tb.Fatalf("SMSGW_BENCH_ROUNDS=%q: want a positive number", s)
	}
	return n
}

// Median is the middle of xs (the upper one of an even count), 0 for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
