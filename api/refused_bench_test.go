package api_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"smsgw/internal/testenv"
)

// BenchmarkRefusedHandler is the refused path without a network: one hot
// phone from one hot client, the shipped defaults (refusal cache on, the
// pumping rules shadowing, the audit writer on Postgres), each request
// served by the handler into a recorder. Its allocations are the refused
// path's own (go test -run '^$' -bench RefusedHandler -benchmem ./api).
func BenchmarkRefusedHandler(b *testing.B) {
	h := benchHandler(b)
	send := func() int {
		r := httptest.NewRequest(http.MethodPost, "/v1/otp/send", strings.NewReader(`{"phone":"+16502530001"}`))
		r.RemoteAddr = "127.0.0.1:40000"
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("X-Forwarded-For", "192.0.2.7")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	if code := send(); code != http.StatusAccepted {
		b.Fatalf("first send: %d, want 202", code)
	}
	// The refusal cache is used once the replica is subscribed.
	testenv.WaitFor(b, 30*time.Second, "a 429", func() bool { return send() == http.StatusTooManyRequests })
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if code := send(); code != http.StatusTooManyRequests {
				b.Errorf("status %d, want 429", code)
				return
			}
		}
	})
}
