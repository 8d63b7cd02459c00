package api_test

import (
	"fmt"
	"net/http"
	"regexp"
	"smsgw/internal/app"
	"strings"
	"testing"
)

func verify(t *testing.T, s *testServer, body string) response {
	t.Helper()
	return do(t, http.MethodPost, s.URL+"/v1/otp/verify", "application/json", strings.NewReader(body), nil)
}

var sixDigits = regexp.MustCompile(`\d{6}`)

func sendAndReadCode(t *testing.T, s *testServer, phone string) string {
	t.Helper()
	if r := send(t, s, fmt.Sprintf(`{"phone": %q}`, phone), nil); r.Status != 202 {
		t.Fatalf("send: %d %s", r.Status, r.Raw)
	}
	msgs := s.outbox.Messages(phone)
	return sixDigits.FindString(msgs[len(msgs)-1].Body)
}

func TestVerifyOverHTTP(t *testing.T) {
	s := newTestServer(t, serverOpts{})
	code := sendAndReadCode(t, s, "+14155552671")
	wrong := "000000"
	if code == wrong {
		wrong = "111111"
	}
	tests := []struct {
		name, body string
		status     int
		errCode    string
		left       any
	}{
		{"never sent", `{"phone": "+14155552672", "code": "123456"}`, 404, "no_pending_code", nil},
		{"wrong code", `{"phone": "+14155552671", "code": "` + wrong + `"}`, 422, "invalid_code", 4.0},
		{"code is a number", `{"phone": "+14155552671", "code": 123456}`, 400, "invalid_request", nil},
		{"code missing", `{"phone": "+14155552671"}`, 400, "invalid_request", nil},
		{"code with letters", `{"phone": "+14155552671", "code": "12a456"}`, 400, "invalid_request", nil},
		{"code too long", `{"phone": "+14155552671", "code": "` + strings.Repeat("1", 40) + `"}`, 400, "invalid_request", nil},
		{"bad phone", `{"phone": "nope", "code": "123456"}`, 400, "invalid_phone", nil},
		{"unknown field", `{"phone": "+14155552671", "code": "1", "pin": "1"}`, 400, "invalid_request", nil},
		{"right code, national notation", `{"phone": "(415) 555-2671", "code": "` + code[:3] + " " + code[3:] + `"}`, 200, "", nil},
		{"used", `{"phone": "+14155552671", "code": "` + code + `"}`, 404, "no_pending_code", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := verify(t, s, tt.body)
			if r.Status != tt.status || r.ErrorCode() != tt.errCode {
				t.Fatalf("got %d %s, want %d %s", r.Status, r.Raw, tt.status, tt.errCode)
			}
			if tt.left != nil && r.ErrorField("attempts_left") != tt.left {
				t.Fatalf("attempts_left = %v, want %v", r.ErrorField("attempts_left"), tt.left)
			}
			if tt.status == 200 && (r.Body["status"] != "approved" || r.Body["phone"] != "+14155552671") {
				t.Fatalf("body %s", r.Raw)
			}
		})
	}
	if r := do(t, http.MethodPost, s.URL+"/v1/otp/verify", "text/plain", strings.NewReader(`{}`), nil); r.Status != 415 {
		t.Fatalf("text/plain: %d", r.Status)
	}
	if r := do(t, http.MethodPost, s.URL+"/v1/otp/verify", "application/json", strings.NewReader(strings.Repeat(" ", 17000)), nil); r.Status != 413 {
		t.Fatalf("huge body: %d", r.Status)
	}
	rows := s.audit.AuditRows()
	outcomes := map[string]int{}
	for _, row := range rows {
		if row["kind"] == "verify" {
			outcomes[row["outcome"].(string)]++
		}
		if strings.Contains(fmt.Sprint(row), code) {
			t.Fatalf("the code is in an audit row: %v", row)
		}
	}
	want := map[string]int{"no_pending_code": 2, "invalid_code": 1, "invalid_request": 7, "invalid_phone": 1, "approved": 1}
	if fmt.Sprint(outcomes) != fmt.Sprint(want) {
		t.Fatalf("verify audit outcomes %v, want %v", outcomes, want)
	}
}

func TestVerifyRateLimitedPerIP(t *testing.T) {
	s := newTestServer(t, serverOpts{})
	for i := 0; i < 20; i++ {
		if r := verify(t, s, `{"phone": "+14155552671", "code": "123456"}`); r.Status != 404 {
			t.Fatalf("verify %d: %d %s", i, r.Status, r.Raw)
		}
	}
	r := verify(t, s, `{"phone": "+14155552671", "code": "123456"}`)
	if r.Status != 429 || r.ErrorCode() != "rate_limited" || r.ErrorField("scope") != "ip" || r.ErrorField("window") != "1m" || r.ErrorField("limit") != 20.0 {
		t.Fatalf("21st verify: %d %s", r.Status, r.Raw)
	}
	if r.Header.Get("Retry-After") == "" || !strings.HasPrefix(r.Header.Get("RateLimit"), `"ip-1m";r=0;`) {
		t.Fatalf("headers %v", r.Header)
	}
}

func TestLocaleAndWebOTPOverHTTP(t *testing.T) {
	s := newTestServer(t, serverOpts{config: func(c *app.Config) {
		c.OTP.Messages = map[string]string{"es": "Tu codigo es {{.Code}}"}
		c.OTP.WebOTPDomain = "example.com"
	}})
	if r := send(t, s, `{"phone": "+14155552671", "locale": "es-MX"}`, nil); r.Status != 202 {
		t.Fatalf("send: %d %s", r.Status, r.Raw)
	}
	body := s.outbox.Messages("+14155552671")[0].Body
	code := sixDigits.FindString(body)
	if want := "Tu codigo es " + code + "\n\n@example.com #" + code; body != want {
		t.Fatalf("text %q, want %q", body, want)
	}
}
