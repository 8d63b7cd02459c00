package e2e

import (
	"fmt"
	"strconv"
	"testing"
	"time"
)

// checkRuleHeaders holds a pumping or spend answer's limit headers to the
// rule its body names: policy, budget, window, nothing left, and a reset
// equal to the body's retry_after and Retry-After.
func checkRuleHeaders(t *testing.T, r response, rule, limit string, window time.Duration) {
	t.Helper()
	if got := r.ErrorField("rule"); got != rule {
		t.Fatalf("body rule %v, want %s: %s", got, rule, r.Raw)
	}
	wantPolicy := fmt.Sprintf(`"%s";q=%s;w=%d`, rule, limit, int(window/time.Second))
	if got := r.Header.Get("RateLimit-Policy"); got != wantPolicy {
		t.Fatalf("RateLimit-Policy %q, want %q", got, wantPolicy)
	}
	if r.Header.Get("X-RateLimit-Limit") != limit || r.Header.Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("X-RateLimit-Limit %q Remaining %q, want %s and 0", r.Header.Get("X-RateLimit-Limit"), r.Header.Get("X-RateLimit-Remaining"), limit)
	}
	if lim, ok := r.ErrorField("limit").(float64); !ok || strconv.FormatFloat(lim, 'f', -1, 64) != limit {
		t.Fatalf("body limit %v, want %s", r.ErrorField("limit"), limit)
	}
	retry, ok := r.ErrorField("retry_after").(float64)
	if r.ErrorCode() == "rate_limited" {
		if !ok || r.Header.Get("Retry-After") != strconv.Itoa(int(retry)) {
			t.Fatalf("retry_after %v, Retry-After %q", r.ErrorField("retry_after"), r.Header.Get("Retry-After"))
		}
		if want := fmt.Sprintf(`"%s";r=0;t=%d`, rule, int(retry)); r.Header.Get("RateLimit") != want {
			t.Fatalf("RateLimit %q, want %q", r.Header.Get("RateLimit"), want)
		}
	}
	reset, err := strconv.ParseInt(r.Header.Get("X-RateLimit-Reset"), 10, 64)
	if err != nil || reset < time.Now().Unix() {
		t.Fatalf("X-RateLimit-Reset %q", r.Header.Get("X-RateLimit-Reset"))
	}
}

// TestPumpingRefusalHeaders: a 429 from a pumping rule or the spend ceiling
// carries that rule's headers, consistent with its body, not those of the
// phone window it never used; a 202 keeps the tightest window's.
func TestPumpingRefusalHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := start(t, e, pumpingConfig+`
[pumping.spend]
default_price = 0.05
hour = 0.25
`)
	send := func(phone, ip string) response {
		return post(t, p.URL+"/v1/otp/send", fmt.Sprintf(`{"phone": %q}`, phone), map[string]string{"X-Forwarded-For": ip})
	}
	for i := range 2 {
		r := send(fmt.Sprintf("+4474001000%02d", i), fmt.Sprintf("203.0.%d.7", i))
		if r.Status != 202 || r.Header.Get("RateLimit-Policy") == "" || r.Header.Get("X-RateLimit-Limit") != "1" {
			t.Fatalf("send %d: %d %v %s", i, r.Status, r.Header, r.Raw)
		}
	}
	t.Run("range, decided in Redis", func(t *testing.T) {
		r := send("+447400100010", "203.0.10.7")
		if r.Status != 429 || r.ErrorField("scope") != "range" {
			t.Fatalf("%d %s", r.Status, r.Raw)
		}
		checkRuleHeaders(t, r, "range_100", "2", 24*time.Hour)
	})
	t.Run("range, answered from memory", func(t *testing.T) {
		r := send("+447400100011", "203.0.11.7")
		if r.Status != 429 || r.ErrorField("scope") != "range" {
			t.Fatalf("%d %s", r.Status, r.Raw)
		}
		checkRuleHeaders(t, r, "range_100", "2", 24*time.Hour)
	})
	t.Run("spend ceiling", func(t *testing.T) {
		// 0.25 an hour at 0.05 a text: 5 texts, two of them above.
		var r response
		for i := range 4 {
			r = send(fmt.Sprintf("+1%d5550123", areaCodes[i]), fmt.Sprintf("198.51.%d.7", i))
		}
		if r.Status != 429 || r.ErrorField("scope") != "spend" {
			t.Fatalf("%d %s", r.Status, r.Raw)
		}
		checkRuleHeaders(t, r, "spend_1h", "0.25", time.Hour)
	})
}
