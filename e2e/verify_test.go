package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

const codesConfig = `
[server]
trusted_proxies = ["127.0.0.0/8"]

[otp]
app_name = "Acme"
message = "{{.Code}} is your {{.App}} code. It expires in {{.TTLMinutes}} minutes."
webotp_domain = "login.acme.example"

[otp.messages]
it = "{{.Code}} e il tuo codice {{.App}}."
`

func outboxBodies(t *testing.T, p *process, phone string) []string {
	t.Helper()
	r := adminCall(t, p, http.MethodGet, "/v1/fake/messages?phone="+strings.Replace(phone, "+", "%2B", 1))
	var msgs []struct{ Body string }
	if err := json.Unmarshal(r.Raw, &msgs); err != nil {
		t.Fatalf("outbox: %s", r.Raw)
	}
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Body
	}
	return out
}

// TestSendReadVerify is the whole frontend journey over HTTP: send, read the
// text (locale, WebOTP line), fail once, verify, and find it all audited
// without the code.
func TestSendReadVerify(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := start(t, e, codesConfig)
	const phone = "+393123456789"
	xff := map[string]string{"X-Forwarded-For": "198.51.100.23"}

	if r := post(t, p.URL+"/v1/otp/send", `{"phone": "312 345 6789", "region": "it", "locale": "it-IT"}`, xff); r.Status != 202 || r.Body["phone"] != phone {
		t.Fatalf("send: %d %s", r.Status, r.Raw)
	}
	bodies := outboxBodies(t, p, phone)
	if len(bodies) != 1 {
		t.Fatalf("outbox %q", bodies)
	}
	m := regexp.MustCompile(`^(\d{6}) e il tuo codice Acme\.\n\n@login\.acme\.example #(\d{6})$`).FindStringSubmatch(bodies[0])
	if m == nil || m[1] != m[2] {
		t.Fatalf("text %q: want the Italian text and a WebOTP line with the same code", bodies[0])
	}
	code := m[1]
	wrong := "000000"
	if code == wrong {
		wrong = "999999"
	}

	r := post(t, p.URL+"/v1/otp/verify", fmt.Sprintf(`{"phone": %q, "code": %q}`, phone, wrong), xff)
	if r.Status != 422 || r.ErrorCode() != "invalid_code" || r.ErrorField("attempts_left") != 4.0 {
		t.Fatalf("wrong code: %d %s", r.Status, r.Raw)
	}
	r = post(t, p.URL+"/v1/otp/verify", fmt.Sprintf(`{"phone": "+39 312 345 6789", "code": %q}`, code), xff)
	if r.Status != 200 || r.Body["status"] != "approved" || r.Body["phone"] != phone {
		t.Fatalf("right code: %d %s", r.Status, r.Raw)
	}
	if r := post(t, p.URL+"/v1/otp/verify", fmt.Sprintf(`{"phone": %q, "code": %q}`, phone, code), xff); r.Status != 404 || r.ErrorCode() != "no_pending_code" {
		t.Fatalf("used code: %d %s", r.Status, r.Raw)
	}
	// A default-locale text for another number.
	post(t, p.URL+"/v1/otp/send", `{"phone": "+14155552671"}`, xff)
	if b := outboxBodies(t, p, "+14155552671"); len(b) != 1 || !regexp.MustCompile(`^\d{6} is your Acme code\. It expires in 10 minutes\.\n\n@login\.acme\.example #\d{6}$`).MatchString(b[0]) {
		t.Fatalf("default text %q", b)
	}

	p.stop(t)
	if strings.Contains(p.stderr.String(), code) {
		t.Fatal("the code is in the service's logs")
	}
	// The audit table holds no code, in any column.
	ctx := context.Background()
	conn := e.db(t)
	defer conn.Close(ctx)
	var dump string
	if err := conn.QueryRow(ctx, `SELECT string_agg(audit_log::text, E'\n') FROM audit_log`).Scan(&dump); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(dump, code) {
		t.Fatalf("the code is in the audit table:\n%s", dump)
	}
	for _, want := range []string{"sent", "invalid_code", "approved", "no_pending_code", "attempts_left:4"} {
		if !strings.Contains(dump, want) {
			t.Fatalf("audit table lacks %q:\n%s", want, dump)
		}
	}
}

func TestAdminOverHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := start(t, e, "")
	post(t, p.URL+"/v1/otp/send", `{"phone": "+14155552671"}`, nil)
	call := func(method, path, token string) response {
		req, _ := http.NewRequest(method, p.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		return roundTrip(t, req)
	}
	if r := call(http.MethodGet, "/v1/admin/limits?phone=%2B14155552671", ""); r.Status != 401 {
		t.Fatalf("no token: %d", r.Status)
	}
	r := call(http.MethodGet, "/v1/admin/limits?phone=%2B14155552671", adminToken)
	if r.Status != 200 || !strings.Contains(string(r.Raw), `"used":1`) {
		t.Fatalf("limits: %d %s", r.Status, r.Raw)
	}
	if r := call(http.MethodDelete, "/v1/admin/limits?phone=%2B14155552671", adminToken); r.Status != 200 {
		t.Fatalf("reset: %d %s", r.Status, r.Raw)
	}
	if r := post(t, p.URL+"/v1/otp/send", `{"phone": "+14155552671"}`, nil); r.Status != 202 {
		t.Fatalf("send after reset: %d %s", r.Status, r.Raw)
	}
	r = call(http.MethodGet, "/v1/admin/audit?phone=%2B14155552671", adminToken)
	var rows []map[string]any
	if err := json.Unmarshal(r.Raw, &rows); err != nil || r.Status != 200 {
		t.Fatalf("audit: %d %s", r.Status, r.Raw)
	}
}

// TestServeNeedsASecret: a missing or short SMSGW_SECRET stops the start
// before anything is created: no database, no schema, no spool.
func TestServeNeedsASecret(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, secret, want string }{
		{"missing", "", "SMSGW_SECRET"},
		{"short", "short", "at least 32"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(binary)
			cmd.Env = append(os.Environ(), "SMSGW_SECRET="+tt.secret, "SMSGW_DATABASE_URL="+absentDatabase(t))
			cmd.Dir = t.TempDir()
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tt.want) {
				t.Fatalf("started with secret %q: %v %s", tt.secret, err, out)
			}
			requireNoSpool(t, cmd.Dir)
		})
	}
}
