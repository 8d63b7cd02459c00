package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"smsgw/internal/app"
	"smsgw/internal/app/apptest"
)

// TestLimitKeys counts a backend's own subject (user_id) beside the address
// and the number: its max admits, the next is 429 naming the key, the admin
// API reads and resets it, a provider's refusal gives it back, and only a
// secret key may name one.
func TestLimitKeys(t *testing.T) {
	const backend, page, origin = "sk-backend-0123456789", "pk-page-0123456789", "https://signup.example.com"
	s := newTestServer(t, serverOpts{adminToken: adminToken, config: func(c *app.Config) {
		c.API.Keys = []app.APIKey{
			{Name: "signup-backend", SHA256: digest(backend), Enabled: true, ForwardClientIP: true},
			{Name: "signup-page", SHA256: digest(page), Enabled: true, Publishable: true, Origins: []string{origin}},
		}
		c.Limits.Key = []app.KeyLimit{{Name: "user_id", Window: app.Duration{Duration: time.Hour}, Max: 3},
			{Name: "session", Window: app.Duration{Duration: time.Minute}, Max: 9}}
	}})
	asBackend := map[string]string{"Authorization": "Bearer " + backend}
	n := 0
	sendAs := func(user string, h map[string]string) response {
		n++
		return send(t, s, fmt.Sprintf(`{"phone": "+1415555%04d", "client_ip": "203.0.113.%d", "limit_keys": {"user_id": %q}}`, 2600+n, n, user), h)
	}
	used := func(user string) float64 {
		t.Helper()
		r := admin(t, s, http.MethodGet, "/v1/admin/limits?key=user_id&value="+user, adminToken)
		if r.Status != 200 || r.Body["key"] != "user_id" {
			t.Fatalf("%d %s", r.Status, r.Raw)
		}
		return r.Body["windows"].([]any)[0].(map[string]any)["used"].(float64)
	}

	for i := range 3 {
		if r := sendAs("u1", asBackend); r.Status != 202 {
			t.Fatalf("send %d: %d %s", i, r.Status, r.Raw)
		}
	}
	r := sendAs("u1", asBackend)
	if r.Status != 429 || r.ErrorField("scope") != "key" || r.ErrorField("key") != "user_id" ||
		r.ErrorField("window") != "1h" || r.ErrorField("limit") != 3.0 {
		t.Fatalf("the 4th: %d %s", r.Status, r.Raw)
	}
	if !strings.Contains(r.Header.Get("RateLimit-Policy"), `"user_id-1h";q=3;w=3600`) || !strings.HasPrefix(r.Header.Get("RateLimit"), `"user_id-1h";r=0;`) {
		t.Fatalf("limit headers %v", r.Header)
	}
	rows := s.audit.AuditRows()
	if last := rows[len(rows)-1]; last["outcome"] != "rate_limited" || last["reason"] != "key:user_id:1h" {
		t.Fatalf("audit %v", last)
	}
	if r := sendAs("u2", asBackend); r.Status != 202 {
		t.Fatalf("another user: %d %s", r.Status, r.Raw)
	}

	t.Run("refused requests count nothing", func(t *testing.T) {
		for _, tt := range []struct {
			name, body string
			header     map[string]string
			want       string
		}{
			{"unknown key", `{"phone": "+14155559001", "limit_keys": {"user_id": "u3", "account": "a"}}`, asBackend, `"account"`},
			{"empty value", `{"phone": "+14155559002", "limit_keys": {"user_id": ""}}`, asBackend, `"user_id"`},
			{"long value", `{"phone": "+14155559003", "limit_keys": {"user_id": "` + strings.Repeat("x", 129) + `"}}`, asBackend, `"user_id"`},
			{"publishable key", `{"phone": "+14155559004", "limit_keys": {"user_id": "u3"}}`,
				map[string]string{"Authorization": "Bearer " + page, "Origin": origin}, `"user_id"`},
		} {
			r := send(t, s, tt.body, tt.header)
			if r.Status != 400 || r.ErrorCode() != "invalid_request" || !strings.Contains(r.ErrorField("message").(string), tt.want) {
				t.Fatalf("%s: %d %s", tt.name, r.Status, r.Raw)
			}
		}
		if u := used("u3"); u != 0 {
			t.Fatalf("u3 used %v", u)
		}
	})
	t.Run("values are not in clear in Redis", func(t *testing.T) {
		keys, err := s.svc.Redis.Keys(context.Background(), s.svc.Prefix+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, k := range keys {
			if _, rest, ok := strings.Cut(k, "send:key:"); ok && strings.Contains(rest, "u1") {
				t.Fatalf("a limit key's value in clear: %s", k)
			}
			found = found || strings.Contains(k, "send:key:user_id:")
		}
		if !found {
			t.Fatalf("no user_id subject among %v", keys)
		}
	})
	t.Run("a provider's refusal gives it back", func(t *testing.T) {
		r := send(t, s, `{"phone": "`+apptest.FailPrefix+`5550100", "client_ip": "203.0.113.200", "limit_keys": {"user_id": "u4"}}`, asBackend)
		if r.Status != 502 {
			t.Fatalf("%d %s", r.Status, r.Raw)
		}
		if u := used("u4"); u != 0 {
			t.Fatalf("u4 used %v after a refund", u)
		}
	})
	t.Run("the admin API resets a value", func(t *testing.T) {
		if u := used("u1"); u != 3 {
			t.Fatalf("u1 used %v", u)
		}
		if r := admin(t, s, http.MethodDelete, "/v1/admin/limits?key=user_id&value=u1", adminToken); r.Status != 200 {
			t.Fatalf("%d %s", r.Status, r.Raw)
		}
		if r := sendAs("u1", asBackend); r.Status != 202 {
			t.Fatalf("after a reset: %d %s", r.Status, r.Raw)
		}
		if r := admin(t, s, http.MethodGet, "/v1/admin/limits?key=nope&value=u1", adminToken); r.Status != 400 {
			t.Fatalf("an unknown key: %d %s", r.Status, r.Raw)
		}
	})
}

// TestLimitKeysNeedAnAPIKey: with no key configured, a caller naming a
// limit key is 400 naming it.
func TestLimitKeysNeedAnAPIKey(t *testing.T) {
	s := newTestServer(t, serverOpts{config: func(c *app.Config) {
		c.Limits.Key = []app.KeyLimit{{Name: "user_id", Window: app.Duration{Duration: time.Hour}, Max: 3}}
	}})
	r := send(t, s, `{"phone": "+14155552671", "limit_keys": {"user_id": "u1"}}`, nil)
	if r.Status != 400 || !strings.Contains(r.ErrorField("message").(string), `"user_id"`) {
		t.Fatalf("%d %s", r.Status, r.Raw)
	}
}
