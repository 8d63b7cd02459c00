package api_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"smsgw/internal/app"
)

func TestAPIKeys(t *testing.T) {
	const live, old = "live-key-0123456789", "retired-key-0123456789"
	s := newTestServer(t, serverOpts{config: func(c *app.Config) {
		c.API.Keys = []app.APIKey{{Name: "web-signup", SHA256: digest(live), Enabled: true}, {Name: "old-app", SHA256: digest(old)}}
	}})
	for _, tt := range []struct {
		name, auth string
		status     int
		reason     string
	}{
		{"no key", "", 401, "missing_key"},
		{"unknown key", "Bearer nope", 401, "unknown_key"},
		{"disabled key", "Bearer " + old, 401, "disabled_key"},
		{"not a bearer", "Basic " + live, 401, "missing_key"},
		{"live key", "Bearer " + live, 202, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := map[string]string{}
			if tt.auth != "" {
				h["Authorization"] = tt.auth
			}
			r := send(t, s, `{"phone": "+14155552671"}`, h)
			if r.Status != tt.status {
				t.Fatalf("%d %s", r.Status, r.Raw)
			}
			if tt.status == 401 && (r.ErrorCode() != "unauthorized" || r.Header.Get("WWW-Authenticate") == "") {
				t.Fatalf("%s %v", r.Raw, r.Header)
			}
			rows := s.audit.AuditRows()
			last := rows[len(rows)-1]
			if tt.status == 401 && (last["outcome"] != "unauthorized" || last["reason"] != tt.reason) {
				t.Fatalf("audit %v", last)
			}
			if tt.status == 202 && last["api_key"] != "web-signup" {
				t.Fatalf("audit %v: want the key's name", last)
			}
		})
	}
	if r := do(t, http.MethodPost, s.URL+"/v1/otp/verify", "application/json", strings.NewReader(`{"phone":"+14155552671","code":"1"}`), nil); r.Status != 401 {
		t.Fatalf("verify without a key: %d", r.Status)
	}
	if strings.Contains(s.audit.String(), live) {
		t.Fatal("an API key is in the audit log")
	}
	if r := do(t, http.MethodGet, s.URL+"/healthz", "", nil, nil); r.Status != 200 {
		t.Fatalf("healthz needs no key: %d", r.Status)
	}
}

func TestPhoneNotAllowedOverHTTP(t *testing.T) {
	s := newTestServer(t, serverOpts{})
	r := send(t, s, `{"phone": "+44 906 123 4567"}`, nil)
	if r.Status != 422 || r.ErrorCode() != "phone_not_allowed" || r.ErrorField("reason") != "type:premium_rate" {
		t.Fatalf("%d %s", r.Status, r.Raw)
	}
	rows := s.audit.AuditRows()
	if rows[0]["outcome"] != "phone_not_allowed" || rows[0]["reason"] != "type:premium_rate" || rows[0]["phone_e164"] != "+449061234567" {
		t.Fatalf("audit %v", rows[0])
	}
}

// digest is how the config names an API key: its SHA-256, in hex.
func digest(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// TestPublishableAndSecretKeys is one deployment serving a page and a
// backend: the page's publishable key only from its origin and never on
// anyone's behalf, the backend's secret key forwarding its users' addresses.
func TestPublishableAndSecretKeys(t *testing.T) {
	const page, backend, origin = "pk-page-0123456789", "sk-backend-0123456789", "https://signup.example.com"
	s := newTestServer(t, serverOpts{config: func(c *app.Config) {
		c.API.Keys = []app.APIKey{
			{Name: "signup-page", SHA256: digest(page), Enabled: true, Publishable: true, Origins: []string{origin}},
			{Name: "signup-backend", SHA256: digest(backend), Enabled: true, ForwardClientIP: true},
		}
	}})
	for _, tt := range []struct {
		name, key, origin, body string
		status                  int
		code, reason, clientIP  string
	}{
		{"page from its origin", page, origin, `{"phone": "+14155552671"}`, 202, "", "", "127.0.0.1"},
		{"page without an origin", page, "", `{"phone": "+14155552672"}`, 401, "unauthorized", "origin_not_allowed", ""},
		{"page from another origin", page, "https://evil.example", `{"phone": "+14155552672"}`, 401, "unauthorized", "origin_not_allowed", ""},
		{"page forwarding an address", page, origin, `{"phone": "+14155552672", "client_ip": "203.0.113.9"}`, 400, "invalid_request", "", ""},
		{"backend for its user", backend, "", `{"phone": "+14155552673", "client_ip": "203.0.113.9"}`, 202, "", "", "203.0.113.9"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := map[string]string{"Authorization": "Bearer " + tt.key}
			if tt.origin != "" {
				h["Origin"] = tt.origin
			}
			r := send(t, s, tt.body, h)
			if r.Status != tt.status || (tt.code != "" && r.ErrorCode() != tt.code) {
				t.Fatalf("%d %s", r.Status, r.Raw)
			}
			rows := s.audit.AuditRows()
			last := rows[len(rows)-1]
			if tt.reason != "" && last["reason"] != tt.reason {
				t.Fatalf("audit %v", last)
			}
			if tt.status == 202 && last["client_ip"] != tt.clientIP {
				t.Fatalf("audit %v: the limits must count %s", last, tt.clientIP)
			}
			if tt.status == 202 && tt.origin != "" && r.Header.Get("Access-Control-Allow-Origin") != origin {
				t.Fatalf("a publishable key's origin is a CORS origin: %v", r.Header)
			}
		})
	}
	pre := do(t, http.MethodOptions, s.URL+"/v1/otp/send", "", nil,
		map[string]string{"Origin": origin, "Access-Control-Request-Method": "POST"})
	if pre.Status != 204 {
		t.Fatalf("preflight from the key's origin: %d %s", pre.Status, pre.Raw)
	}
}
