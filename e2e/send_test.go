package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"smsgw/internal/testenv"
)

// shortWindows keeps the SPEC's shape with windows a test can wait out.
const shortWindows = `
[server]
trusted_proxies = ["127.0.0.0/8"]

[[limits.ip]]
window = "2s"
max = 5

[[limits.ip]]
window = "4s"
max = 6

[[limits.phone]]
window = "2s"
max = 1

[[limits.phone]]
window = "4s"
max = 2

[sender.fake]
fail_prefixes = ["+1201"]
`

func TestSendOverHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := start(t, e, shortWindows)
	xff := map[string]string{"X-Forwarded-For": "203.0.113.5", "X-Request-ID": "e2e-first"}

	r := post(t, p.URL+"/v1/otp/send", `{"phone": "(415) 555-2671"}`, xff)
	if r.Status != 202 || r.Body["phone"] != "+14155552671" || r.Body["status"] != "pending" || r.Body["id"] != "e2e-first" || r.Body["expires_in"] != 600.0 {
		t.Fatalf("send: %d %s", r.Status, r.Raw)
	}
	if r.Header.Get("RateLimit") != `"phone-2s";r=0;t=2` || r.Header.Get("X-Request-ID") != "e2e-first" {
		t.Fatalf("headers: %v", r.Header)
	}
	if got := r.Header.Get("RateLimit-Policy"); got != `"phone-2s";q=1;w=2, "phone-4s";q=2;w=4, "ip-2s";q=5;w=2, "ip-4s";q=6;w=4` {
		t.Fatalf("RateLimit-Policy = %s", got)
	}

	msgs := adminCall(t, p, http.MethodGet, "/v1/fake/messages?phone=%2B14155552671")
	var outbox []map[string]string
	if err := json.Unmarshal(msgs.Raw, &outbox); err != nil || len(outbox) != 1 {
		t.Fatalf("outbox: %s", msgs.Raw)
	}
	code := regexp.MustCompile(`\d{6}`).FindString(outbox[0]["body"])
	if code == "" {
		t.Fatalf("no code in %q", outbox[0]["body"])
	}

	r = post(t, p.URL+"/v1/otp/send", `{"phone": "+1 415 555 2671"}`, map[string]string{"X-Forwarded-For": "203.0.113.5"})
	if r.Status != 429 || r.ErrorCode() != "rate_limited" || r.ErrorField("scope") != "phone" || r.ErrorField("window") != "2s" {
		t.Fatalf("second send: %d %s", r.Status, r.Raw)
	}
	retry := int(r.ErrorField("retry_after").(float64))
	if retry < 1 || retry > 2 || r.Header.Get("Retry-After") != strconv.Itoa(retry) {
		t.Fatalf("retry_after %d, Retry-After %q", retry, r.Header.Get("Retry-After"))
	}
	// Waiting exactly retry_after is enough.
	time.Sleep(time.Duration(retry) * time.Second)
	r = post(t, p.URL+"/v1/otp/send", `{"phone": "+14155552671"}`, map[string]string{"X-Forwarded-For": "203.0.113.5"})
	if r.Status != 202 {
		t.Fatalf("after retry_after: %d %s", r.Status, r.Raw)
	}
	// The 4s window now holds two: the third is refused by it.
	r = post(t, p.URL+"/v1/otp/send", `{"phone": "+14155552671"}`, map[string]string{"X-Forwarded-For": "203.0.113.5"})
	if r.Status != 429 || r.ErrorField("window") != "4s" && r.ErrorField("window") != "2s" {
		t.Fatalf("third: %d %s", r.Status, r.Raw)
	}

	for _, tc := range []struct {
		body   string
		status int
		code   string
	}{
		{`{"phone": 1}`, 400, "invalid_request"},
		{`{"phone": "nope"}`, 400, "invalid_phone"},
		{`{"phone": "+1 201 555 0123"}`, 502, "provider_error"},
	} {
		if r := post(t, p.URL+"/v1/otp/send", tc.body, nil); r.Status != tc.status || r.ErrorCode() != tc.code {
			t.Fatalf("%s: %d %s", tc.body, r.Status, r.Raw)
		}
	}
	if r := get(t, p.URL+"/readyz"); r.Status != 200 {
		t.Fatalf("readyz %d %s", r.Status, r.Raw)
	}
	if r := get(t, p.URL+"/metrics"); r.Status != 200 || !strings.Contains(string(r.Raw), "smsgw_audit_rows_written_total") {
		t.Fatalf("metrics %d", r.Status)
	}

	p.stop(t) // flushes the audit log
	rows := auditRows(t, e)
	want := []struct{ outcome, reason, phone, ip string }{
		{"sent", "<null>", "+14155552671", "203.0.113.5"},
		{"rate_limited", "phone:2s", "+14155552671", "203.0.113.5"},
		{"sent", "resend", "+14155552671", "203.0.113.5"}, // the first code is still pending
		{"rate_limited", "", "+14155552671", "203.0.113.5"},
		{"invalid_request", "invalid_request", "<null>", "127.0.0.1"},
		{"invalid_phone", "<null>", "<null>", "127.0.0.1"},
		{"provider_error", "refused", "+12015550123", "127.0.0.1"},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d audit rows, want %d: %+v", len(rows), len(want), rows)
	}
	for i, w := range want {
		r := rows[i]
		if r.Kind != "send" || r.Outcome != w.outcome || deref(r.Phone) != w.phone || deref(r.ClientIP) != w.ip ||
			(w.reason != "" && deref(r.Reason) != w.reason) {
			t.Errorf("row %d: %s %s reason=%s phone=%s ip=%s; want %+v", i, r.Kind, r.Outcome, deref(r.Reason), deref(r.Phone), deref(r.ClientIP), w)
		}
	}
	if rows[0].RequestID != "e2e-first" || deref(rows[0].Provider) != "fake" || rows[0].MessageID == nil {
		t.Errorf("first row %+v", rows[0])
	}
	if strings.Contains(p.stderr.String(), code) {
		t.Error("the code appears in the service's logs")
	}
}

// TestTwoProcessesRace races requests through two service processes sharing
// one Redis: the limits hold across replicas.
func TestTwoProcessesRace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := `
[server]
trusted_proxies = ["127.0.0.0/8"]

[pumping]
mode = "off" # the windows are tested here, with many unverified texts
`
	a, b := start(t, e, cfg), start(t, e, cfg)
	race := func(name string, want int, body func(i int) (string, string)) {
		t.Run(name, func(t *testing.T) {
			got := testenv.Race(t, 100, func(i int) string {
				url := a.URL
				if i%2 == 1 {
					url = b.URL
				}
				phone, ip := body(i)
				r := post(t, url+"/v1/otp/send", fmt.Sprintf(`{"phone": %q}`, phone), map[string]string{"X-Forwarded-For": ip})
				if r.Status != 202 && r.Status != 429 {
					t.Errorf("%d %s", r.Status, r.Raw)
				}
				return strconv.Itoa(r.Status)
			})
			if got["202"] != want || got["429"] != 100-want {
				t.Fatalf("accepted %d, limited %d; want %d and %d", got["202"], got["429"], want, 100-want)
			}
		})
	}
	race("one phone from 100 IPs", 1, func(i int) (string, string) {
		return "+14155552671", fmt.Sprintf("198.18.0.%d", i)
	})
	race("one IP for 100 phones", 5, func(i int) (string, string) {
		return fmt.Sprintf("+1650253%04d", i), "198.18.1.1"
	})
	race("one IPv6 /64 for 100 phones", 5, func(i int) (string, string) {
		return fmt.Sprintf("+1650254%04d", i), fmt.Sprintf("2001:db8:7:7::%x", i+1)
	})
	a.stop(t)
	b.stop(t)
	// Every request is counted once: on its own row, or past its subject's
	// share of the minute on the subject's rollup.
	counted, sent := 0, 0
	for _, r := range auditRows(t, e) {
		counted += r.Count
		if r.Outcome == "sent" {
			sent++
		}
	}
	if counted != 300 || sent != 11 {
		t.Fatalf("audit rows count %d requests (%d sent), want 300 (11 sent)", counted, sent)
	}
}

// TestShutdownLosesNoAuditRow sends SIGTERM in the middle of a load: every
// request that got an answer has its row.
func TestShutdownLosesNoAuditRow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := start(t, e, "[server]\ntrusted_proxies = [\"127.0.0.0/8\"]\n")
	// Eight workers' worth of phones, all from one address.
	l := startLoadOf(t, func() string { return p.URL }, 8, func(n int64) (string, string) {
		return fmt.Sprintf("+1650253%04d", n%8000), "127.0.0.1"
	})
	testenv.WaitFor(t, 60*time.Second, "some load", func() bool { return l.count() > 50 })
	p.stop(t)
	answered := int64(len(l.end()))
	// Every answered request is counted once: on a row of its own, or on a
	// rollup once its subject had its share of rows this minute.
	var got int64
	for _, r := range auditRows(t, e) {
		got += int64(r.Count)
	}
	if got != answered || got == 0 {
		t.Fatalf("audit rows count %d requests for %d answered", got, answered)
	}
}

func TestMigrateCreatesTheDatabase(t *testing.T) {
	t.Parallel()
	name := "smsgw_test_migrate_" + testenv.Unique()
	dsn := testenv.WithDatabase(testenv.PostgresURL(), name)
	t.Cleanup(func() { testenv.DropDatabase(t, name) })
	for i := 0; i < 2; i++ {
		cmd := exec.Command(binary, "migrate")
		cmd.Env = append(cmd.Environ(), "SMSGW_DATABASE_URL="+dsn)
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("migrate run %d: %v\n%s", i, err, out)
		}
		log := string(out)
		if i == 0 && (!strings.Contains(log, `"msg":"database created","database":"`+name+`"`) || !strings.Contains(log, "001_audit_log.sql")) {
			t.Fatalf("the first run does not say it created the database and applied 001: %s", out)
		}
		if i == 1 && (strings.Contains(log, "null") || strings.Contains(log, "database created") || !strings.Contains(log, `"applied_now":0`)) {
			t.Fatalf("the second run: %s", out)
		}
	}
	auditRows(t, env{databaseURL: dsn}) // the table is there
}

func TestInvalidConfigExitsNamingTheKey(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "bad.toml")
	writeFile(t, path, "[otp]\nmax_attempts = -1\n")
	out, err := exec.Command(binary, "-config", path).CombinedOutput()
	if err == nil {
		t.Fatal("started with an invalid config")
	}
	if !strings.Contains(string(out), "otp.max_attempts") {
		t.Fatalf("output does not name the key: %s", out)
	}
	out, err = exec.Command(binary, "serve", "-config", path+".missing").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no such file") {
		t.Fatalf("missing config file: %v %s", err, out)
	}
	out, err = exec.Command(binary, "frobnicate").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "unknown command") {
		t.Fatalf("unknown command: %v %s", err, out)
	}
}

// TestProviderConfigErrorsStopTheStart: a provider that cannot work stops the
// start, naming what is wrong.
func TestProviderConfigErrorsStopTheStart(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, config string
		env          []string
		want         string
	}{
		{"twilio without credentials", "[sender]\nprovider = \"twilio\"\n[sender.twilio]\nfrom = \"+15005550006\"\n", nil, "TWILIO_ACCOUNT_SID"},
		{"twilio without a sender", "[sender]\nprovider = \"twilio\"\n", []string{"TWILIO_ACCOUNT_SID=AC0123456789abcdef0123456789abcdef", "TWILIO_AUTH_TOKEN=0123456789abcdef0123456789abcdef"}, "sender.twilio.from"},
		{"gateway without a URL", "[sender]\nprovider = \"http\"\n", []string{"SMSGW_HTTP_SECRET=" + strings.Repeat("s", 40)}, "sender.http.url"},
		{"gateway without a secret", "[sender]\nprovider = \"http\"\n[sender.http]\nurl = \"https://sms.internal/send\"\n", nil, "SMSGW_HTTP_SECRET"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "smsgw.toml")
			writeFile(t, path, tt.config)
			cmd := exec.Command(binary, "-config", path)
			// Credentials are checked before anything is created.
			cmd.Env = append(os.Environ(), "SMSGW_SECRET="+secret, "SMSGW_DATABASE_URL="+absentDatabase(t), "TWILIO_ACCOUNT_SID=", "TWILIO_AUTH_TOKEN=", "SMSGW_HTTP_SECRET=")
			cmd.Env = append(cmd.Env, tt.env...)
			cmd.Dir = t.TempDir()
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tt.want) {
				t.Fatalf("%v\n%s\nwant it to name %s", err, out, tt.want)
			}
			requireNoSpool(t, cmd.Dir)
		})
	}
}
