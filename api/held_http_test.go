package api_test

import (
	"net/http"
	"strconv"
	"testing"

	"smsgw/internal/app"
)

// A client refused again and again with the same body is answered from the
// refused path's memories (its decoded body, its answer): each answer is
// the one the first refusal got, with its own request id and the wait as
// it is then, and each is audited. Another body from the same client is
// decoded and decided on its own, a malformed one still answers 400, and
// all of it holds whether the refusals come from Redis or from the
// replica's refusal cache.
func TestRefusedAgainAndAgain(t *testing.T) {
	for _, cache := range []int{0, 100000} {
		t.Run("refusal cache "+strconv.Itoa(cache), func(t *testing.T) {
			s := newTestServer(t, serverOpts{config: func(c *app.Config) {
				trustLoopback(c)
				c.Limits.LocalRefusalCache = cache
			}})
			from := map[string]string{"X-Forwarded-For": "192.0.2.7"}
			const body = `{"phone":"+14155552671"}`
			if r := send(t, s, body, from); r.Status != http.StatusAccepted {
				t.Fatalf("first: %d %s", r.Status, r.Raw)
			}
			var first response
			ids := map[string]bool{}
			for i := range 5 {
				r := send(t, s, body, from)
				if r.Status != http.StatusTooManyRequests || r.ErrorCode() != "rate_limited" {
					t.Fatalf("refusal %d: %d %s", i, r.Status, r.Raw)
				}
				retry := int(r.ErrorField("retry_after").(float64))
				if r.Header.Get("Retry-After") != strconv.Itoa(retry) ||
					r.Header.Get("RateLimit") != `"phone-1m";r=0;t=`+strconv.Itoa(retry) {
					t.Fatalf("refusal %d: headers %v, body %s", i, r.Header, r.Raw)
				}
				ids[r.Header.Get("X-Request-ID")] = true
				if i == 0 {
					first = r
					continue
				}
				for _, h := range []string{"Content-Type", "RateLimit-Policy", "X-RateLimit-Limit", "X-RateLimit-Remaining"} {
					if r.Header.Get(h) != first.Header.Get(h) {
						t.Fatalf("refusal %d: %s %q, the first had %q", i, h, r.Header.Get(h), first.Header.Get(h))
					}
				}
				for _, f := range []string{"scope", "window", "limit"} {
					if r.ErrorField(f) != first.ErrorField(f) {
						t.Fatalf("refusal %d: %s %v, the first had %v", i, f, r.ErrorField(f), first.ErrorField(f))
					}
				}
			}
			if len(ids) != 5 {
				t.Fatalf("%d request ids for 5 refusals", len(ids))
			}
			// The same client, another number: decided on its own.
			if r := send(t, s, `{"phone":"+14155552672"}`, from); r.Status != http.StatusAccepted {
				t.Fatalf("another number: %d %s", r.Status, r.Raw)
			}
			// The refused number written otherwise: decoded, then refused.
			if r := send(t, s, `{"phone": "+1 415 555 2671"}`, from); r.Status != http.StatusTooManyRequests {
				t.Fatalf("the number written otherwise: %d %s", r.Status, r.Raw)
			}
			// A malformed body from the refused client: its own answer.
			if r := send(t, s, `{"phone":"+14155552671"`, from); r.Status != http.StatusBadRequest || r.ErrorCode() != "invalid_request" {
				t.Fatalf("malformed: %d %s", r.Status, r.Raw)
			}
			counted := map[string]int{}
			for _, row := range s.audit.AuditRows() {
				n := 1
				if c, ok := row["count"].(float64); ok {
					n = int(c)
				}
				counted[row["outcome"].(string)] += n
			}
			if counted["rate_limited"] != 6 || counted["sent"] != 2 || counted["invalid_request"] != 1 {
				t.Fatalf("audited %v, want 6 rate_limited, 2 sent, 1 invalid_request", counted)
			}
		})
	}
}
