package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"smsgw/internal/app"
)

// TestForwardClientIP: a backend whose key has forward_client_ip passes its
// users' addresses, and the per-IP windows count each user, not the
// backend; anyone else's client_ip is 400 invalid_request, audited.
func TestForwardClientIP(t *testing.T) {
	const backend, web = "backend-key-0123456789", "web-key-0123456789"
	s := newTestServer(t, serverOpts{config: func(c *app.Config) {
		c.API.Keys = []app.APIKey{
			{Name: "signup-backend", SHA256: digest(backend), Enabled: true, ForwardClientIP: true},
			{Name: "web-signup", SHA256: digest(web), Enabled: true},
		}
	}})
	asBackend := map[string]string{"Authorization": "Bearer " + backend}
	asWeb := map[string]string{"Authorization": "Bearer " + web}
	verify := func(body string, h map[string]string) response {
		t.Helper()
		return do(t, http.MethodPost, s.URL+"/v1/otp/verify", "application/json", strings.NewReader(body), h)
	}

	t.Run("refused from a key without forward_client_ip", func(t *testing.T) {
		r := send(t, s, `{"phone": "+14155550101", "client_ip": "203.0.113.7"}`, asWeb)
		if r.Status != 400 || r.ErrorCode() != "invalid_request" || !strings.Contains(errMessage(r), "forward_client_ip") {
			t.Fatalf("%d %s", r.Status, r.Raw)
		}
		rows := s.audit.AuditRows()
		if last := rows[len(rows)-1]; last["outcome"] != "invalid_request" || last["client_ip"] != "127.0.0.1" {
			t.Fatalf("audit %v", last)
		}
		if r := verify(`{"phone": "+14155550101", "code": "123456", "client_ip": "203.0.113.7"}`, asWeb); r.Status != 400 || r.ErrorCode() != "invalid_request" {
			t.Fatalf("verify: %d %s", r.Status, r.Raw)
		}
	})
	t.Run("not an address", func(t *testing.T) {
		for _, ip := range []string{"nope", "203.0.113.7:80", "fe80::1%eth0", "203.0.113.0/24"} {
			r := send(t, s, fmt.Sprintf(`{"phone": "+14155550102", "client_ip": %q}`, ip), asBackend)
			if r.Status != 400 || r.ErrorCode() != "invalid_request" || !strings.Contains(errMessage(r), "client_ip") {
				t.Fatalf("%s: %d %s", ip, r.Status, r.Raw)
			}
		}
	})
	t.Run("each user counted apart", func(t *testing.T) {
		// Six users behind one backend: the backend's own address would be
		// refused at the sixth (5 a minute per IP); their own are not.
		for i := range 6 {
			ip := fmt.Sprintf("198.51.100.%d", 10+i)
			r := send(t, s, fmt.Sprintf(`{"phone": "+1415555%04d", "client_ip": %q}`, 2000+i, ip), asBackend)
			if r.Status != 202 {
				t.Fatalf("user %d: %d %s", i, r.Status, r.Raw)
			}
			rows := s.audit.AuditRows()
			if last := rows[len(rows)-1]; last["client_ip"] != ip || last["api_key"] != "signup-backend" {
				t.Fatalf("audit %v: want the user's address", last)
			}
		}
		// IPv4-mapped IPv6 is the IPv4 address.
		if r := send(t, s, `{"phone": "+14155553000", "client_ip": "::ffff:198.51.100.10"}`, asBackend); r.Status != 202 {
			t.Fatalf("mapped: %d %s", r.Status, r.Raw)
		}
		rows := s.audit.AuditRows()
		if last := rows[len(rows)-1]; last["client_ip"] != "198.51.100.10" {
			t.Fatalf("audit %v", last)
		}
	})
	t.Run("one user's window applies to that user", func(t *testing.T) {
		var last response
		for i := range 6 {
			last = send(t, s, fmt.Sprintf(`{"phone": "+1415555%04d", "client_ip": "192.0.2.99"}`, 4000+i), asBackend)
		}
		if last.Status != 429 || last.ErrorField("scope") != "ip" {
			t.Fatalf("sixth send of one user: %d %s", last.Status, last.Raw)
		}
		// The backend's other users are not held back.
		if r := send(t, s, `{"phone": "+14155554100", "client_ip": "192.0.2.100"}`, asBackend); r.Status != 202 {
			t.Fatalf("another user: %d %s", r.Status, r.Raw)
		}
	})
	t.Run("verify counts the user", func(t *testing.T) {
		r := verify(`{"phone": "+14155559999", "code": "123456", "client_ip": "192.0.2.200"}`, asBackend)
		if r.Status != 404 || r.ErrorCode() != "no_pending_code" {
			t.Fatalf("%d %s", r.Status, r.Raw)
		}
		rows := s.audit.AuditRows()
		if last := rows[len(rows)-1]; last["client_ip"] != "192.0.2.200" {
			t.Fatalf("audit %v", last)
		}
	})
}

// TestClientIPWithoutKeys: with no API keys configured nobody may forward.
func TestClientIPWithoutKeys(t *testing.T) {
	s := newTestServer(t, serverOpts{})
	r := send(t, s, `{"phone": "+14155552671", "client_ip": "203.0.113.7"}`, nil)
	if r.Status != 400 || r.ErrorCode() != "invalid_request" {
		t.Fatalf("%d %s", r.Status, r.Raw)
	}
	if n := len(s.outbox.Messages("")); n != 0 {
		t.Fatalf("%d texts", n)
	}
}

func errMessage(r response) string { m, _ := r.ErrorField("message").(string); return m }
