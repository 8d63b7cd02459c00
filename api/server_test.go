package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/audit"
	"smsgw/internal/app"
	"smsgw/internal/app/apptest"
	"smsgw/internal/testenv"
	"smsgw/otp"
	"smsgw/sender/fake"
)

type testServer struct {
	URL    string
	outbox *fake.Provider
	audit  *testenv.Buffer
	svc    apptest.Service
}

type serverOpts struct {
	rdb        *redis.Client // nil: the test Redis
	prefix     string        // with rdb: its key prefix
	adminToken string
	auditLog   otp.AuditLog // nil: JSON lines into testServer.audit
	// postgres, a database URL, keeps the audit trail there (auditLog is
	// then unused).
	postgres string
	config   func(*app.Config)
	log      *slog.Logger
}

// newTestServer runs the service, built by the composition root, on a free
// loopback port.
func newTestServer(t *testing.T, o serverOpts) *testServer {
	t.Helper()
	buf := &testenv.Buffer{}
	auditLog := o.auditLog
	if auditLog == nil {
		auditLog = audit.NewJSONLines(buf)
	}
	svc := apptest.New(t, apptest.Options{Redis: o.rdb, Prefix: o.prefix, Config: o.config, AdminToken: o.adminToken,
		AuditLog: auditLog, Postgres: o.postgres, Log: o.log})
	return &testServer{URL: svc.URL, outbox: svc.Outbox, audit: buf, svc: svc}
}

func trustLoopback(c *app.Config) { c.Server.TrustedProxies = []string{"127.0.0.0/8"} }

type response = testenv.Response

func do(t *testing.T, method, url, contentType string, body io.Reader, header map[string]string) response {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return testenv.Do(t, http.DefaultClient, req)
}

func send(t *testing.T, s *testServer, body string, header map[string]string) response {
	t.Helper()
	return do(t, http.MethodPost, s.URL+"/v1/otp/send", "application/json", strings.NewReader(body), header)
}

func TestSendAccepted(t *testing.T) {
	s := newTestServer(t, serverOpts{})
	r := send(t, s, `{"phone": "(415) 555-2671", "locale": "en-US"}`, map[string]string{"X-Request-ID": "req-abc-123"})
	if r.Status != http.StatusAccepted {
		t.Fatalf("status %d: %s", r.Status, r.Raw)
	}
	want := map[string]any{"id": "req-abc-123", "phone": "+14155552671", "status": "pending", "expires_in": 600.0}
	for k, v := range want {
		if r.Body[k] != v {
			t.Errorf("body.%s = %v, want %v", k, r.Body[k], v)
		}
	}
	if got := r.Header.Get("X-Request-ID"); got != "req-abc-123" {
		t.Errorf("X-Request-ID = %q, want the incoming one", got)
	}
	wantHeaders := map[string]string{
		"RateLimit-Policy":      `"phone-1m";q=1;w=60, "phone-10m";q=5;w=600, "phone-1h";q=10;w=3600, "ip-1m";q=5;w=60, "ip-10m";q=30;w=600, "ip-1h";q=50;w=3600`,
		"RateLimit":             `"phone-1m";r=0;t=60`,
		"X-RateLimit-Limit":     "1",
		"X-RateLimit-Remaining": "0",
	}
	for k, v := range wantHeaders {
		if got := r.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	reset, _ := strconv.ParseInt(r.Header.Get("X-RateLimit-Reset"), 10, 64)
	if d := reset - time.Now().Unix(); d < 59 || d > 61 {
		t.Errorf("X-RateLimit-Reset = %d, %d s from now; want about 60", reset, d)
	}
	if r.Header.Get("Retry-After") != "" {
		t.Error("Retry-After on an accepted request")
	}
	if msgs := s.outbox.Messages("+14155552671"); len(msgs) != 1 {
		t.Fatalf("outbox: %+v", msgs)
	}
	rows := s.audit.AuditRows()
	if len(rows) != 1 || rows[0]["outcome"] != "sent" || rows[0]["phone_e164"] != "+14155552671" ||
		rows[0]["request_id"] != "req-abc-123" || rows[0]["client_ip"] != "127.0.0.1" || rows[0]["provider"] != "fake" || rows[0]["provider_message_id"] == "" {
		t.Fatalf("audit rows %v", rows)
	}
	// The row was durable as sending before the provider was called.
	var outcomes []any
	for _, l := range s.audit.JSONLines() {
		outcomes = append(outcomes, l["outcome"])
	}
	if len(outcomes) != 2 || outcomes[0] != "sending" || outcomes[1] != "sent" {
		t.Fatalf("audit lines %v, want sending then sent", outcomes)
	}
	if strings.Contains(s.audit.String(), strings.TrimPrefix(s.outbox.Messages("")[0].Body, "Your verification code is ")) {
		t.Fatal("the code is in the audit log")
	}
}

// failingAudit makes no row durable; Accepting says so only when told.
type failingAudit struct{ admits bool }

func (f failingAudit) Record(context.Context, otp.AuditEvent) error {
	return errors.New("disk full and Postgres down")
}
func (f failingAudit) Finish(otp.AuditEvent)       {}
func (f failingAudit) Note(otp.AuditEvent, string) {}
func (f failingAudit) Accepting() error {
	if f.admits {
		return nil
	}
	return errors.New("not durable")
}

// TestSendWithoutDurableAudit: when no row can be made durable, a send
// answers 503 unavailable and texts nobody, whether the audit log knew it
// before the send (Accepting) or found out at its row (sending); the quota
// the send took is given back.
func TestSendWithoutDurableAudit(t *testing.T) {
	for _, tc := range []struct {
		name string
		log  failingAudit
	}{
		{"known before", failingAudit{admits: false}},
		{"found at the sending row", failingAudit{admits: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t, serverOpts{auditLog: tc.log})
			for i := 0; i < 3; i++ {
				r := send(t, s, `{"phone": "+14155552671"}`, nil)
				if r.Status != 503 || r.ErrorCode() != "unavailable" {
					t.Fatalf("send %d: %d %s", i, r.Status, r.Raw)
				}
			}
			if msgs := s.outbox.Messages(""); len(msgs) != 0 {
				t.Fatalf("texted without a durable row: %+v", msgs)
			}
			// A verify is refused while the log says it cannot make rows
			// durable; past that, with no code pending it changes nothing
			// and is answered without waiting for its row (SPEC "Audit").
			want := 503
			if tc.log.admits {
				want = 404
			}
			if r := verify(t, s, `{"phone": "+14155552671", "code": "123456"}`); r.Status != want {
				t.Fatalf("verify: %d %s, want %d", r.Status, r.Raw, want)
			}
			// Nothing was consumed: with a working log the phone's one send
			// a minute is still there.
			ok := newTestServer(t, serverOpts{rdb: s.svc.Redis, prefix: s.svc.Prefix})
			if r := send(t, ok, `{"phone": "+14155552671"}`, nil); r.Status != 202 {
				t.Fatalf("send after: %d %s", r.Status, r.Raw)
			}
		})
	}
}

func TestSendRateLimited(t *testing.T) {
	s := newTestServer(t, serverOpts{})
	if r := send(t, s, `{"phone": "+14155552671"}`, nil); r.Status != http.StatusAccepted {
		t.Fatalf("first: %d %s", r.Status, r.Raw)
	}
	r := send(t, s, `{"phone": "+1 415 555 2671"}`, nil)
	if r.Status != http.StatusTooManyRequests || r.ErrorCode() != "rate_limited" {
		t.Fatalf("second: %d %s", r.Status, r.Raw)
	}
	if r.ErrorField("scope") != "phone" || r.ErrorField("window") != "1m" || r.ErrorField("limit") != 1.0 {
		t.Fatalf("error fields: %s", r.Raw)
	}
	retry := r.ErrorField("retry_after").(float64)
	if retry < 59 || retry > 60 {
		t.Fatalf("retry_after = %v", retry)
	}
	if got := r.Header.Get("Retry-After"); got != strconv.Itoa(int(retry)) {
		t.Fatalf("Retry-After = %q, body retry_after = %v", got, retry)
	}
	if got, want := r.Header.Get("RateLimit"), fmt.Sprintf(`"phone-1m";r=0;t=%d`, int(retry)); got != want {
		t.Fatalf("RateLimit = %q, want %q", got, want)
	}
	if r.Header.Get("X-RateLimit-Remaining") != "0" || r.Header.Get("RateLimit-Policy") == "" {
		t.Fatalf("headers %v", r.Header)
	}
	rows := s.audit.AuditRows()
	if last := rows[len(rows)-1]; last["outcome"] != "rate_limited" || last["reason"] != "phone:1m" {
		t.Fatalf("audit row %v", last)
	}
}

func TestSendClientErrors(t *testing.T) {
	s := newTestServer(t, serverOpts{})
	big := `{"phone": "+14155552671", "locale": "` + strings.Repeat("x", 17000) + `"}`
	exactly16k := `{"phone": "+14155552671"}` + strings.Repeat(" ", 16384-len(`{"phone": "+14155552671"}`))
	tests := []struct {
		name, contentType, body string
		status                  int
		code                    string
	}{
		{"not JSON", "application/json", `phone=+14155552671`, 400, "invalid_request"},
		{"empty body", "application/json", ``, 400, "invalid_request"},
		{"phone is a number", "application/json", `{"phone": 14155552671}`, 400, "invalid_request"},
		{"phone is an object", "application/json", `{"phone": {"n": 1}}`, 400, "invalid_request"},
		{"region is a number", "application/json", `{"phone": "+14155552671", "region": 1}`, 400, "invalid_request"},
		{"missing phone", "application/json", `{"region": "US"}`, 400, "invalid_request"},
		{"null phone", "application/json", `{"phone": null}`, 400, "invalid_request"},
		{"empty phone", "application/json", `{"phone": ""}`, 400, "invalid_request"},
		{"array body", "application/json", `["+14155552671"]`, 400, "invalid_request"},
		{"two objects", "application/json", `{"phone": "+14155552671"}{"phone": "+14155552672"}`, 400, "invalid_request"},
		{"truncated", "application/json", `{"phone": "+1415`, 400, "invalid_request"},
		{"unknown field", "application/json", `{"phone": "+14155552671", "phone_number": "x"}`, 400, "invalid_request"},
		{"region not alpha-2", "application/json", `{"phone": "+14155552671", "region": "USA"}`, 400, "invalid_request"},
		{"locale too long", "application/json", `{"phone": "+14155552671", "locale": "` + strings.Repeat("a", 40) + `"}`, 400, "invalid_request"},
		{"no content type", "", `{"phone": "+14155552671"}`, 415, "unsupported_media_type"},
		{"text/plain", "text/plain", `{"phone": "+14155552671"}`, 415, "unsupported_media_type"},
		{"form", "application/x-www-form-urlencoded", `phone=1`, 415, "unsupported_media_type"},
		{"latin1 charset", "application/json; charset=latin1", `{"phone": "+14155552671"}`, 415, "unsupported_media_type"},
		{"garbage content type", "application/json; ;;=", `{"phone": "+14155552671"}`, 415, "unsupported_media_type"},
		{"over 16 KiB", "application/json", big, 413, "request_too_large"},
		{"letters", "application/json", `{"phone": "call me"}`, 400, "invalid_phone"},
		{"too short", "application/json", `{"phone": "12"}`, 400, "invalid_phone"},
		{"unknown country code", "application/json", `{"phone": "+999 1234 5678"}`, 400, "invalid_phone"},
		{"5000 digits", "application/json", `{"phone": "` + strings.Repeat("5", 5000) + `"}`, 400, "invalid_phone"},
		{"NUL byte", "application/json", `{"phone": "+1415555\u00002671"}`, 400, "invalid_phone"},
		{"invalid UTF-8", "application/json", "{\"phone\": \"+1415\xff5552671\"}", 400, "invalid_phone"},
		{"unknown region, national number", "application/json", `{"phone": "415 555 2671", "region": "ZZ"}`, 400, "invalid_phone"},
		{"exactly 16 KiB is read", "application/json; charset=UTF-8", exactly16k, 202, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, http.MethodPost, s.URL+"/v1/otp/send", tt.contentType, strings.NewReader(tt.body), nil)
			if r.Status != tt.status || r.ErrorCode() != tt.code {
				t.Fatalf("got %d %s, want %d %s", r.Status, r.Raw, tt.status, tt.code)
			}
			if tt.code != "" {
				if msg, _ := r.ErrorField("message").(string); msg == "" {
					t.Fatalf("no message in %s", r.Raw)
				}
				if r.Header.Get("RateLimit") != "" {
					t.Fatal("limit headers on a request that never reached the limiter")
				}
			}
			if r.Header.Get("X-Request-ID") == "" {
				t.Fatal("no X-Request-ID")
			}
		})
	}
	// Nothing but the one valid request was texted, and every request left
	// exactly one audit row.
	if n := len(s.outbox.Messages("")); n != 1 {
		t.Fatalf("outbox holds %d texts", n)
	}
	rows := s.audit.AuditRows()
	if len(rows) != len(tests) {
		t.Fatalf("%d audit rows for %d requests", len(rows), len(tests))
	}
	for _, row := range rows[:len(rows)-1] {
		if o := row["outcome"]; o != "invalid_request" && o != "invalid_phone" {
			t.Fatalf("audit outcome %v", row)
		}
	}
}

func TestSendProviderRefusal(t *testing.T) {
	s := newTestServer(t, serverOpts{})
	for i := 0; i < 3; i++ { // refunds: never rate_limited
		r := send(t, s, `{"phone": "+1 201 555 0123"}`, nil)
		if r.Status != http.StatusBadGateway || r.ErrorCode() != "provider_error" {
			t.Fatalf("attempt %d: %d %s", i, r.Status, r.Raw)
		}
	}
	rows := s.audit.AuditRows()
	if rows[0]["outcome"] != "provider_error" || rows[0]["provider"] != "fake" || rows[0]["reason"] != "refused" {
		t.Fatalf("audit row %v", rows[0])
	}
}

func TestSendRedisDown(t *testing.T) {
	dead := testenv.DeadRedis(t)
	s := newTestServer(t, serverOpts{rdb: dead})
	start := time.Now()
	r := send(t, s, `{"phone": "+14155552671"}`, nil)
	if r.Status != http.StatusServiceUnavailable || r.ErrorCode() != "unavailable" {
		t.Fatalf("%d %s", r.Status, r.Raw)
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("took %v to fail closed", el)
	}
	if strings.Contains(string(r.Raw), "127.0.0.1:1") {
		t.Errorf("internal detail leaked: %s", r.Raw)
	}
	if len(s.outbox.Messages("")) != 0 {
		t.Fatal("texted without a limit check")
	}
	if rows := s.audit.AuditRows(); len(rows) != 1 || rows[0]["outcome"] != "unavailable" {
		t.Fatalf("audit %v", rows)
	}
}

func TestRequestIDs(t *testing.T) {
	s := newTestServer(t, serverOpts{})
	for _, tt := range []struct{ name, in string }{
		{"none", ""},
		{"too long", strings.Repeat("a", 129)},
		{"spaces", "a b"},
		{"log injection", "abc\u2028def"},
		{"quotes", `"abc"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, http.MethodGet, s.URL+"/healthz", "", nil, map[string]string{"X-Request-ID": tt.in})
			got := r.Header.Get("X-Request-ID")
			if got == "" || got == tt.in || len(got) != 36 {
				t.Fatalf("X-Request-ID %q for incoming %q: want a fresh UUID", got, tt.in)
			}
		})
	}
	r := do(t, http.MethodGet, s.URL+"/nope", "", nil, map[string]string{"X-Request-ID": "trace-1"})
	if r.Status != 404 || r.ErrorCode() != "not_found" || r.Header.Get("X-Request-ID") != "trace-1" {
		t.Fatalf("unknown route: %d %v %s", r.Status, r.Header, r.Raw)
	}
	r = do(t, http.MethodGet, s.URL+"/v1/otp/send", "", nil, nil)
	if r.Status != 405 || r.ErrorCode() != "method_not_allowed" {
		t.Fatalf("wrong method: %d %s", r.Status, r.Raw)
	}
}

func TestClientIPFromTrustedProxy(t *testing.T) {
	s := newTestServer(t, serverOpts{config: trustLoopback})
	// Five sends from one client behind the proxy fill its minute; a spoofed
	// left-most hop does not make it another client.
	for i := 0; i < 5; i++ {
		h := map[string]string{"X-Forwarded-For": fmt.Sprintf("10.9.9.%d, 203.0.113.9", i)}
		if r := send(t, s, fmt.Sprintf(`{"phone": "+1415555267%d"}`, i), h); r.Status != 202 {
			t.Fatalf("send %d: %d %s", i, r.Status, r.Raw)
		}
	}
	r := send(t, s, `{"phone": "+14155552679"}`, map[string]string{"X-Forwarded-For": "203.0.113.9"})
	if r.Status != 429 || r.ErrorField("scope") != "ip" {
		t.Fatalf("sixth: %d %s", r.Status, r.Raw)
	}
	if r := send(t, s, `{"phone": "+14155552679"}`, map[string]string{"X-Forwarded-For": "203.0.113.10"}); r.Status != 202 {
		t.Fatalf("another client: %d %s", r.Status, r.Raw)
	}
	rows := s.audit.AuditRows()
	if rows[0]["client_ip"] != "203.0.113.9" {
		t.Fatalf("audit client_ip %v", rows[0]["client_ip"])
	}
}

// TestFakeMessages: outside -dev the fake outbox holds real people's codes,
// so it answers only to the admin token.
func TestFakeMessages(t *testing.T) {
	s := newTestServer(t, serverOpts{adminToken: "admin-token-0123456789"})
	admin := map[string]string{"Authorization": "Bearer admin-token-0123456789"}
	send(t, s, `{"phone": "+44 7400 123456"}`, nil)
	send(t, s, `{"phone": "+14155552671"}`, nil)
	if r := do(t, http.MethodGet, s.URL+"/v1/fake/messages?phone=%2B447400123456", "", nil, nil); r.Status != 401 || r.ErrorCode() != "unauthorized" {
		t.Fatalf("without the admin token: %d %s", r.Status, r.Raw)
	}
	if r := do(t, http.MethodGet, s.URL+"/v1/fake/messages", "", nil, map[string]string{"Authorization": "Bearer wrong"}); r.Status != 401 {
		t.Fatalf("with a wrong token: %d %s", r.Status, r.Raw)
	}
	for _, q := range []string{"%2B447400123456", "+447400123456", "%2B44%207400%20123456"} {
		t.Run(q, func(t *testing.T) {
			r := do(t, http.MethodGet, s.URL+"/v1/fake/messages?phone="+q, "", nil, admin)
			var msgs []map[string]any
			if err := json.Unmarshal(r.Raw, &msgs); err != nil || r.Status != 200 {
				t.Fatalf("%d %s", r.Status, r.Raw)
			}
			if len(msgs) != 1 || msgs[0]["to"] != "+447400123456" || !strings.HasPrefix(msgs[0]["body"].(string), "Your verification code is ") {
				t.Fatalf("messages %s", r.Raw)
			}
			if _, err := time.Parse(time.RFC3339, msgs[0]["sent_at"].(string)); err != nil {
				t.Fatalf("sent_at: %v", err)
			}
		})
	}
	if r := do(t, http.MethodGet, s.URL+"/v1/fake/messages?phone=nope", "", nil, admin); r.Status != 400 || r.ErrorCode() != "invalid_phone" {
		t.Fatalf("bad phone: %d %s", r.Status, r.Raw)
	}
	r := do(t, http.MethodGet, s.URL+"/v1/fake/messages?phone=%2B14155559999", "", nil, admin)
	if r.Status != 200 || strings.TrimSpace(string(r.Raw)) != "[]" {
		t.Fatalf("no texts must be [], got %d %s", r.Status, r.Raw)
	}
}

// Every log line of a request names it, the domain's included.
func TestLogLinesNameTheRequest(t *testing.T) {
	logs := &testenv.Buffer{}
	log := slog.New(otp.NewLogHandler(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	s := newTestServer(t, serverOpts{log: log})
	send(t, s, `{"phone": "+14155552671"}`, map[string]string{"X-Request-ID": "trace-me-1"})
	var seen []string
	for _, line := range logs.JSONLines() {
		if line["request_id"] == "trace-me-1" {
			seen = append(seen, line["msg"].(string))
		}
	}
	if !slices.Contains(seen, "request") {
		t.Fatalf("lines of the request: %q; all: %s", seen, logs.String())
	}
}

func TestHealthReadyMetrics(t *testing.T) {
	// A Postgres nobody listens for: the service serves, spooling its audit rows.
	s := newTestServer(t, serverOpts{postgres: "postgres://postgres@127.0.0.1:1/smsgw?sslmode=disable"})
	if r := do(t, http.MethodGet, s.URL+"/healthz", "", nil, nil); r.Status != 200 {
		t.Fatalf("healthz %d", r.Status)
	}
	r := do(t, http.MethodGet, s.URL+"/readyz", "", nil, nil)
	if r.Status != 503 || r.ErrorCode() != "unavailable" || !strings.Contains(string(r.Raw), "postgres") {
		t.Fatalf("readyz %d %s", r.Status, r.Raw)
	}
	if failed := r.ErrorField("failed").([]any); len(failed) != 1 || failed[0] != "postgres" {
		t.Fatalf("failed = %v", failed)
	}
	s2 := newTestServer(t, serverOpts{postgres: testenv.MigratedDatabase(t)})
	if r := do(t, http.MethodGet, s2.URL+"/readyz", "", nil, nil); r.Status != 200 {
		t.Fatalf("readyz %d %s", r.Status, r.Raw)
	}
	send(t, s2, `{"phone": "+14155552671"}`, nil)
	m := do(t, http.MethodGet, s2.URL+"/metrics", "", nil, nil)
	for _, want := range []string{`smsgw_http_requests_total{route="/v1/otp/send",status="202"} 1`, `smsgw_requests_total{kind="send",outcome="sent",reason=""} 1`} {
		if !strings.Contains(string(m.Raw), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestIdempotencyKeyOverHTTP(t *testing.T) {
	s := newTestServer(t, serverOpts{})
	h := map[string]string{"Idempotency-Key": "8e0c6b7e-3b1f-4a5e-9a51-2a4f0d8a7c11"}
	first := send(t, s, `{"phone": "+14155552671"}`, h)
	if first.Status != 202 || first.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first: %d %v %s", first.Status, first.Header, first.Raw)
	}
	again := send(t, s, `{"phone": "(415) 555-2671"}`, h)
	if again.Status != 202 || again.Header.Get("Idempotent-Replayed") != "true" || string(again.Raw) != string(first.Raw) {
		t.Fatalf("replay: %d %s, want the first answer %s", again.Status, again.Raw, first.Raw)
	}
	if again.Header.Get("RateLimit") != first.Header.Get("RateLimit") {
		t.Fatalf("replay headers %v", again.Header)
	}
	// Without the key the same send is limited: the replay took no quota.
	if r := send(t, s, `{"phone": "+14155552671"}`, nil); r.Status != 429 {
		t.Fatalf("no key: %d", r.Status)
	}
	for _, bad := range []string{strings.Repeat("k", 256), "ké"} {
		if r := send(t, s, `{"phone": "+14155552672"}`, map[string]string{"Idempotency-Key": bad}); r.Status != 400 || r.ErrorCode() != "invalid_request" {
			t.Fatalf("key %q: %d %s", bad, r.Status, r.Raw)
		}
	}
	rows := s.audit.AuditRows()
	if rows[1]["outcome"] != "sent" || rows[1]["reason"] != "idempotent_replay" || rows[1]["provider_message_id"] != rows[0]["provider_message_id"] {
		t.Fatalf("replay audit row %v", rows[1])
	}
	if n := len(s.outbox.Messages("+14155552671")); n != 1 {
		t.Fatalf("%d texts", n)
	}
}
