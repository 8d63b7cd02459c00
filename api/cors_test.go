package api_test

import (
	"net/http"
	"strings"
	"testing"

	"smsgw/internal/app"
)

func TestCORS(t *testing.T) {
	tests := []struct {
		name    string
		origins []string
		origin  string
		// preflight answer, and the Allow-Origin of preflight and send
		preflight   int
		allowOrigin string
		credentials bool
	}{
		{"exact origin", []string{"https://signup.example.com"}, "https://signup.example.com", 204, "https://signup.example.com", true},
		{"origin in another case", []string{"https://signup.example.com"}, "https://SIGNUP.example.com", 204, "https://SIGNUP.example.com", true},
		{"another origin", []string{"https://signup.example.com"}, "https://evil.example", 403, "", false},
		{"a subdomain is another origin", []string{"https://example.com"}, "https://signup.example.com", 403, "", false},
		{"another port is another origin", []string{"https://signup.example.com"}, "https://signup.example.com:8443", 403, "", false},
		{"wildcard, never with credentials", []string{"*"}, "https://any.example", 204, "*", false},
		{"none configured: 403 saying where to allow it", nil, "https://signup.example.com", 403, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestServer(t, serverOpts{config: func(c *app.Config) { c.Server.CORSOrigins = tt.origins }})
			pre := do(t, http.MethodOptions, s.URL+"/v1/otp/send", "", nil, map[string]string{
				"Origin": tt.origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type, idempotency-key"})
			if pre.Status != tt.preflight {
				t.Fatalf("preflight: %d %s", pre.Status, pre.Raw)
			}
			if got := pre.Header.Get("Access-Control-Allow-Origin"); got != tt.allowOrigin {
				t.Fatalf("preflight Allow-Origin %q, want %q", got, tt.allowOrigin)
			}
			if got := pre.Header.Get("Access-Control-Allow-Credentials") == "true"; got != tt.credentials {
				t.Fatalf("preflight Allow-Credentials %v, want %v", got, tt.credentials)
			}
			if tt.allowOrigin != "" {
				if h := pre.Header.Get("Access-Control-Allow-Headers"); !strings.Contains(h, "Idempotency-Key") || !strings.Contains(h, "Content-Type") {
					t.Fatalf("Allow-Headers %q", h)
				}
			}
			if tt.origins != nil && !strings.Contains(strings.Join(pre.Header.Values("Vary"), ","), "Origin") {
				t.Fatalf("Vary %v: caches must keep answers per origin", pre.Header.Values("Vary"))
			}
			r := send(t, s, `{"phone": "+14155552671"}`, map[string]string{"Origin": tt.origin})
			if r.Status != http.StatusAccepted {
				t.Fatalf("send: %d %s", r.Status, r.Raw)
			}
			if got := r.Header.Get("Access-Control-Allow-Origin"); got != tt.allowOrigin {
				t.Fatalf("send Allow-Origin %q, want %q", got, tt.allowOrigin)
			}
			if tt.allowOrigin != "" && !strings.Contains(r.Header.Get("Access-Control-Expose-Headers"), "RateLimit") {
				t.Fatalf("Expose-Headers %q", r.Header.Get("Access-Control-Expose-Headers"))
			}
			// The admin API is never offered to browsers of other sites.
			adm := do(t, http.MethodOptions, s.URL+"/v1/admin/limits", "", nil, map[string]string{"Origin": tt.origin, "Access-Control-Request-Method": "DELETE"})
			if adm.Header.Get("Access-Control-Allow-Origin") != "" {
				t.Fatalf("admin preflight allowed: %v", adm.Header)
			}
		})
	}
}

func TestOpenAPIServed(t *testing.T) {
	s := newTestServer(t, serverOpts{})
	r := do(t, http.MethodGet, s.URL+"/openapi.json", "", nil, nil)
	if r.Status != 200 || r.Body["openapi"] != "3.1.0" || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("%d %s %.200s", r.Status, r.Header.Get("Content-Type"), r.Raw)
	}
}

// Wrong admin tokens are slowed down per client address; the right token
// waits too while its address is throttled, other addresses do not.
func TestWrongAdminTokensThrottled(t *testing.T) {
	s := newTestServer(t, serverOpts{adminToken: adminToken, config: trustLoopback})
	from := func(ip, token string) response {
		t.Helper()
		return do(t, http.MethodGet, s.URL+"/v1/admin/limits?ip=192.0.2.1", "", nil,
			map[string]string{"Authorization": "Bearer " + token, "X-Forwarded-For": ip})
	}
	for i := range 10 {
		if r := from("198.51.100.1", "guess"); r.Status != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d", i, r.Status)
		}
	}
	r := from("198.51.100.1", "guess")
	if r.Status != http.StatusTooManyRequests || r.ErrorCode() != "rate_limited" || r.ErrorField("scope") != "admin_auth" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("11th wrong token: %d %v %s", r.Status, r.Header, r.Raw)
	}
	if r := from("198.51.100.1", adminToken); r.Status != http.StatusTooManyRequests {
		t.Fatalf("the right token from the throttled address: %d", r.Status)
	}
	if r := from("198.51.100.2", adminToken); r.Status != http.StatusOK {
		t.Fatalf("another address: %d %s", r.Status, r.Raw)
	}
	if !strings.Contains(s.audit.String(), `"outcome":"rate_limited"`) {
		t.Fatalf("throttled attempts are not audited:\n%s", s.audit.String())
	}
}
