package testenv

import (
	"net/http"
	"strings"
	"testing"
)

// recorder is a testing.TB that notes failures instead of failing.
type recorder struct {
	testing.TB
	failed []string
}

func (r *recorder) Errorf(format string, args ...any) { r.failed = append(r.failed, format) }
func (r *recorder) Fatalf(format string, args ...any) { r.failed = append(r.failed, format) }
func (r *recorder) Helper()                           {}

// TestCheckContract: the check passes what the contract allows and catches
// what it does not, so a response that drifts from openapi.json fails its test.
func TestCheckContract(t *testing.T) {
	ok := http.Header{"X-Request-Id": {"req-1"}, "Content-Type": {"application/json"}}
	limits := http.Header{"X-Request-Id": {"req-1"}, "Content-Type": {"application/json"},
		"Ratelimit-Policy": {`"phone-1m";q=1;w=60`}, "Ratelimit": {`"phone-1m";r=0;t=60`},
		"X-Ratelimit-Limit": {"1"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"1795316532"}}
	tests := []struct {
		name         string
		method, path string
		status       int
		header       http.Header
		body         string
		valid        bool
	}{
		{"accepted send", "POST", "/v1/otp/send", 202, limits, `{"id":"req-1","verification_id":"ver-1","phone":"+14155552671","status":"pending","expires_in":600}`, true},
		{"send without limit headers", "POST", "/v1/otp/send", 202, ok, `{"id":"req-1","verification_id":"ver-1","phone":"+14155552671","status":"pending","expires_in":600}`, false},
		{"send with a malformed RateLimit", "POST", "/v1/otp/send", 202, http.Header{"X-Request-Id": {"r"}, "Content-Type": {"application/json"}, "Ratelimit": {"phone-1m r=0"}}, `{"id":"req-1","verification_id":"ver-1","phone":"+14155552671","status":"pending","expires_in":600}`, false},
		{"send missing id", "POST", "/v1/otp/send", 202, limits, `{"phone":"+14155552671","status":"pending","expires_in":600}`, false},
		{"send with an extra field", "POST", "/v1/otp/send", 202, limits, `{"id":"r","phone":"+14155552671","status":"pending","expires_in":600,"code":"123456"}`, false},
		{"phone not E.164", "POST", "/v1/otp/send", 202, limits, `{"id":"r","phone":"4155552671","status":"pending","expires_in":600}`, false},
		{"error envelope", "POST", "/v1/otp/verify", 404, ok, `{"error":{"code":"no_pending_code","message":"nothing pending"}}`, true},
		{"wrong code for the status", "POST", "/v1/otp/verify", 404, ok, `{"error":{"code":"invalid_code","message":"x"}}`, false},
		{"error without message", "POST", "/v1/otp/verify", 422, ok, `{"error":{"code":"invalid_code"}}`, false},
		{"no request id", "GET", "/healthz", 200, http.Header{"Content-Type": {"application/json"}}, `{"status":"ok"}`, false},
		{"unknown route, envelope", "GET", "/v1/nope", 404, ok, `{"error":{"code":"not_found","message":"no such endpoint"}}`, true},
		{"unknown route, other body", "GET", "/v1/nope", 404, ok, `not found`, false},
		{"undocumented route answering 200", "GET", "/v1/secret", 200, ok, `{}`, false},
		{"verify with its limit headers", "POST", "/v1/otp/verify", 200, limits, `{"status":"approved","phone":"+14155552671"}`, true},
		{"an unlisted header", "GET", "/healthz", 200, http.Header{"X-Request-Id": {"r"}, "Content-Type": {"application/json"}, "Ratelimit": {`"ip-1m";r=0;t=1`}}, `{"status":"ok"}`, false},
		{"a pumping rule's limit headers", "POST", "/v1/otp/send", 429, http.Header{"X-Request-Id": {"r"}, "Content-Type": {"application/json"}, "Retry-After": {"86000"},
			"Ratelimit-Policy": {`"range_100";q=2;w=86400`}, "Ratelimit": {`"range_100";r=0;t=86000`}, "X-Ratelimit-Limit": {"2"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"1795316532"}},
			`{"error":{"code":"rate_limited","message":"held","scope":"range","rule":"range_100","window":"24h","limit":2,"retry_after":86000}}`, true},
		{"an unknown scope", "POST", "/v1/otp/send", 429, limits, `{"error":{"code":"rate_limited","message":"x","scope":"galaxy","window":"1m","limit":1,"retry_after":1}}`, false},
		{"a spend budget with a fraction", "POST", "/v1/otp/send", 429, http.Header{"X-Request-Id": {"r"}, "Content-Type": {"application/json"}, "Retry-After": {"60"},
			"X-Ratelimit-Limit": {"12.5"}}, `{"error":{"code":"rate_limited","message":"x","scope":"spend","rule":"spend_1h","window":"1h","limit":12.5,"retry_after":60}}`, true},
		{"audit rows", "GET", "/v1/admin/audit", 200, ok, `[{"id":"1","created_at":"2026-11-22T09:00:00Z","kind":"send","outcome":"sent","request_id":"r","phone_e164":null}]`, true},
		{"audit row with a bad kind", "GET", "/v1/admin/audit", 200, ok, `[{"id":"1","created_at":"2026-11-22T09:00:00Z","kind":"sms","outcome":"sent","request_id":"r"}]`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, "http://127.0.0.1:1"+tt.path, strings.NewReader(""))
			rec := &recorder{TB: t}
			CheckContract(rec, req, tt.status, tt.header, []byte(tt.body))
			if valid := len(rec.failed) == 0; valid != tt.valid {
				t.Errorf("valid = %v, want %v (%v)", valid, tt.valid, rec.failed)
			}
		})
	}
}
