package api_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// BenchmarkAcceptedHandler is the accepted path without a network: every
// request a new valid number from a new client address, the shipped
// defaults (the pumping rules shadowing, the audit writer and the
// verification records on Postgres, the fake provider), each request served
// by the handler into a recorder. Its allocations and CPU are the accepted
// path's own plus the Redis and Postgres clients'
// (go test -run '^$' -bench AcceptedHandler -benchmem ./api); with
// -cpuprofile it is the profile of an accepted send.
func BenchmarkAcceptedHandler(b *testing.B) {
	h := benchHandler(b)
	var seq atomic.Uint64
	send := func() int {
		n := seq.Add(1)
		r := httptest.NewRequest(http.MethodPost, "/v1/otp/send", strings.NewReader(`{"phone":"`+benchUSPhone(n)+`"}`))
		r.RemoteAddr = "127.0.0.1:40000"
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("X-Forwarded-For", benchIP())
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	if code := send(); code != http.StatusAccepted {
		b.Fatalf("first send: %d, want 202", code)
	}
	// Enough requests in flight to keep both cores busy while each waits
	// for Redis and for its rows' group commits.
	b.SetParallelism(32)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if code := send(); code != http.StatusAccepted {
				b.Errorf("status %d, want 202", code)
				return
			}
		}
	})
}
