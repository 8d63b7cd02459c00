package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"smsgw/audit"
	"smsgw/internal/testenv"
)

const adminToken = "admin-token-for-tests"

func admin(t *testing.T, s *testServer, method, path, token string) response {
	t.Helper()
	h := map[string]string{}
	if token != "" {
		h["Authorization"] = "Bearer " + token
	}
	return do(t, method, s.URL+path, "", nil, h)
}

// postgresAudit is a fresh migrated database for the service's audit trail,
// and a reader of it.
func postgresAudit(t *testing.T) (dsn string, reader *audit.Reader) {
	t.Helper()
	pool := testenv.Pool(t)
	return pool.Config().ConnString(), audit.NewReader(pool)
}

func TestAdminAuth(t *testing.T) {
	off := newTestServer(t, serverOpts{})
	if r := admin(t, off, http.MethodGet, "/v1/admin/limits?phone=%2B14155552671", adminToken); r.Status != 404 || r.ErrorCode() != "not_found" {
		t.Fatalf("no token configured: %d %s", r.Status, r.Raw)
	}
	on := newTestServer(t, serverOpts{adminToken: adminToken})
	for _, tt := range []struct{ name, header string }{
		{"no header", ""},
		{"wrong token", "Bearer nope"},
		{"token prefix", "Bearer " + adminToken[:5]},
		{"token plus more", "Bearer " + adminToken + "x"},
		{"basic scheme", "Basic " + adminToken},
		{"lower-case scheme", "bearer"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, http.MethodGet, on.URL+"/v1/admin/limits?phone=%2B14155552671", "", nil, map[string]string{"Authorization": tt.header})
			if r.Status != 401 || r.ErrorCode() != "unauthorized" || r.Header.Get("WWW-Authenticate") == "" {
				t.Fatalf("%d %s", r.Status, r.Raw)
			}
		})
	}
	rows := on.audit.AuditRows()
	if len(rows) != 6 || rows[0]["kind"] != "admin" || rows[0]["outcome"] != "unauthorized" {
		t.Fatalf("refused admin calls must be audited: %v", rows)
	}
}

func TestAdminLimits(t *testing.T) {
	s := newTestServer(t, serverOpts{adminToken: adminToken})
	const phone = "+14155552671"
	code := sendAndReadCode(t, s, phone)
	verify(t, s, `{"phone": "+14155552671", "code": "`+wrongOf(code)+`"}`)

	r := admin(t, s, http.MethodGet, "/v1/admin/limits?phone=+14155552671", adminToken) // unencoded +
	if r.Status != 200 || r.Body["phone"] != phone {
		t.Fatalf("%d %s", r.Status, r.Raw)
	}
	windows := r.Body["windows"].([]any)
	if len(windows) != 3 {
		t.Fatalf("windows %v", windows)
	}
	w := windows[0].(map[string]any)
	if w["policy"] != "send" || w["scope"] != "phone" || w["window"] != "1m" || w["used"] != 1.0 || w["limit"] != 1.0 || w["remaining"] != 0.0 {
		t.Fatalf("window %v", w)
	}
	if reset := w["reset"].(float64); reset < 59 || reset > 60 {
		t.Fatalf("reset %v", reset)
	}
	c := r.Body["code"].(map[string]any)
	if c["pending"] != true || c["attempts"] != 1.0 || c["attempts_left"] != 4.0 || c["expires_in"].(float64) < 590 {
		t.Fatalf("code %v", c)
	}
	if strings.Contains(string(r.Raw), code) {
		t.Fatal("the admin API shows the code")
	}

	ip := admin(t, s, http.MethodGet, "/v1/admin/limits?ip=127.0.0.1", adminToken)
	if ip.Status != 200 || ip.Body["ip"] != "127.0.0.1" || len(ip.Body["windows"].([]any)) != 5 {
		t.Fatalf("ip: %d %s", ip.Status, ip.Raw)
	}
	policies := ""
	for _, w := range ip.Body["windows"].([]any) {
		m := w.(map[string]any)
		policies += fmt.Sprintf("%s:%s=%v ", m["policy"], m["window"], m["used"])
	}
	if policies != "send:1m=1 send:10m=1 send:1h=1 verify:1m=1 verify:1h=1 " {
		t.Fatalf("ip windows %s", policies)
	}

	if r := send(t, s, `{"phone": "+14155552671"}`, nil); r.Status != 429 {
		t.Fatalf("before reset: %d", r.Status)
	}
	del := admin(t, s, http.MethodDelete, "/v1/admin/limits?phone=%2B14155552671", adminToken)
	if del.Status != 200 || del.Body["windows"].([]any)[0].(map[string]any)["used"] != 0.0 {
		t.Fatalf("delete: %d %s", del.Status, del.Raw)
	}
	if r := send(t, s, `{"phone": "+14155552671"}`, nil); r.Status != 202 {
		t.Fatalf("after reset: %d %s", r.Status, r.Raw)
	}
	if again := s.outbox.Messages(phone); sixDigits.FindString(again[len(again)-1].Body) != code {
		t.Fatal("a limits reset must leave the pending code alone")
	}

	for _, bad := range []string{"", "?phone=%2B14155552671&ip=127.0.0.1", "?phone=nope", "?ip=300.1.1.1"} {
		r := admin(t, s, http.MethodGet, "/v1/admin/limits"+bad, adminToken)
		if r.Status != 400 {
			t.Fatalf("%q: %d %s", bad, r.Status, r.Raw)
		}
	}
	rows := s.audit.AuditRows()
	actions := map[string]int{}
	for _, row := range rows {
		if row["kind"] == "admin" {
			actions[row["reason"].(string)+"/"+row["outcome"].(string)]++
		}
	}
	if actions["limits.get/ok"] != 2 || actions["limits.delete/ok"] != 1 || actions["limits.get/invalid_request"] != 3 || actions["limits.get/invalid_phone"] != 1 {
		t.Fatalf("admin audit %v", actions)
	}
}

func wrongOf(code string) string {
	if code == "000000" {
		return "111111"
	}
	return "000000"
}

func TestAdminAudit(t *testing.T) {
	dsn, reader := postgresAudit(t)
	s := newTestServer(t, serverOpts{adminToken: adminToken, postgres: dsn})
	const phone = "+14155552671"
	code := sendAndReadCode(t, s, phone)
	verify(t, s, `{"phone": "+14155552671", "code": "`+wrongOf(code)+`"}`)
	verify(t, s, `{"phone": "+14155552671", "code": "`+code+`"}`)
	send(t, s, `{"phone": "+14155550000"}`, nil)

	// Rows are written in the background: wait until the phone's three are in.
	testenv.WaitUntil(t, 5*time.Second, "the phone's three rows", func() error {
		rows, err := reader.Recent(context.Background(), phone, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 3 {
			return fmt.Errorf("%d rows for %s", len(rows), phone)
		}
		return nil
	})
	r := admin(t, s, http.MethodGet, "/v1/admin/audit?phone=%2B14155552671&limit=2", adminToken)
	if r.Status != 200 {
		t.Fatalf("%d %s", r.Status, r.Raw)
	}
	var got []map[string]any
	if err := json.Unmarshal(r.Raw, &got); err != nil || len(got) != 2 {
		t.Fatalf("rows: %s %v", r.Raw, err)
	}
	if got[0]["kind"] != "verify" || got[0]["outcome"] != "approved" || got[1]["outcome"] != "invalid_code" || got[1]["reason"] != "attempts_left:4" {
		t.Fatalf("newest first: %s", r.Raw)
	}
	if got[0]["phone_e164"] != phone || got[0]["client_ip"] != "127.0.0.1" || got[0]["delivery_status"] != nil {
		t.Fatalf("row %v", got[0])
	}
	if strings.Contains(string(r.Raw), code) {
		t.Fatal("the code is in the audit rows")
	}
	for _, bad := range []string{"?limit=0", "?limit=1001", "?limit=x", "?phone=nope"} {
		if r := admin(t, s, http.MethodGet, "/v1/admin/audit"+bad, adminToken); r.Status != 400 {
			t.Fatalf("%s: %d", bad, r.Status)
		}
	}
	// Reading the audit log is itself audited.
	testenv.WaitUntil(t, 5*time.Second, "the audit read to be audited", func() error {
		r = admin(t, s, http.MethodGet, "/v1/admin/audit?limit=50", adminToken)
		if !strings.Contains(string(r.Raw), `"audit.get"`) || !strings.Contains(string(r.Raw), `"kind":"admin"`) {
			return fmt.Errorf("admin reads are not audited: %s", r.Raw)
		}
		return nil
	})

	dev := newTestServer(t, serverOpts{adminToken: adminToken})
	if r := admin(t, dev, http.MethodGet, "/v1/admin/audit", adminToken); r.Status != 503 || r.ErrorCode() != "unavailable" {
		t.Fatalf("without Postgres: %d %s", r.Status, r.Raw)
	}
}
