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
