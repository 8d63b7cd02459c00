package twilio

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/twilio/twilio-go/client"

	"smsgw/internal/testenv"
	"smsgw/otp"
	"smsgw/sender"
	"smsgw/sender/twilio/twiliotest"
)

const (
	testSID   = "AC0123456789abcdef0123456789abcdef"
	testToken = "f0e1d2c3b4a5968778695a4b3c2d1e0f"
	testMG    = "MG00112233445566778899aabbccddeeff"
	testMsg   = "SM9f8e7d6c5b4a39281706f5e4d3c2b1a0"
	testFrom  = "+15005550006"
	testTo    = "+14155552671"
)

var _ sender.Provider = (*Provider)(nil)

// seen is one request the fake Twilio received.
type seen struct {
	method, path, host, contentType, userAgent string
	user, pass                                 string
	authOK                                     bool
	form                                       url.Values
}

// fakeTwilio is an httptest server speaking Twilio's Messages API. answer
// writes the response; nil answers 201 with a queued message echoing the form.
type fakeTwilio struct {
	srv    *httptest.Server
	answer func(w http.ResponseWriter, r *http.Request)

	mu   sync.Mutex
	reqs []seen
}

func newFakeTwilio(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) *fakeTwilio {
	t.Helper()
	f := &fakeTwilio{answer: answer}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeTwilio) serve(w http.ResponseWriter, r *http.Request) {
	s := seen{method: r.Method, path: r.URL.Path, host: r.Host,
		contentType: r.Header.Get("Content-Type"), userAgent: r.Header.Get("User-Agent")}
	s.user, s.pass, s.authOK = r.BasicAuth()
	if err := r.ParseForm(); err == nil {
		s.form = r.PostForm
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, s)
	f.mu.Unlock()
	if f.answer != nil {
		f.answer(w, r)
		return
	}
	writeMessage(w, r, s.form)
}

func (f *fakeTwilio) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.reqs...)
}

// writeMessage answers like Twilio does on a successful create.
func writeMessage(w http.ResponseWriter, _ *http.Request, form url.Values) {
	var from, msid any
	if v := form.Get("From"); v != "" {
		from = v
	}
	if v := form.Get("MessagingServiceSid"); v != "" {
		msid = v
	}
	msg := map[string]any{
		"account_sid":           testSID,
		"api_version":           "2010-04-01",
		"body":                  form.Get("Body"),
		"date_created":          "Thu, 24 Aug 2023 05:01:45 +0000",
		"date_sent":             nil,
		"date_updated":          "Thu, 24 Aug 2023 05:01:45 +0000",
		"direction":             "outbound-api",
		"error_code":            nil,
		"error_message":         nil,
		"from":                  from,
		"messaging_service_sid": msid,
		"num_media":             "0",
		"num_segments":          "1",
		"price":                 nil,
		"price_unit":            "USD",
		"sid":                   testMsg,
		"status":                "queued",
		"subresource_uris": map[string]string{
			"media": "/2010-04-01/Accounts/" + testSID + "/Messages/" + testMsg + "/Media.json",
		},
		"to":  form.Get("To"),
		"uri": "/2010-04-01/Accounts/" + testSID + "/Messages/" + testMsg + ".json",
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(msg)
}

func newProvider(t *testing.T, cfg Config) *Provider {
	t.Helper()
	if cfg.AccountSID == "" {
		cfg.AccountSID = testSID
	}
	if cfg.AuthToken == "" {
		cfg.AuthToken = testToken
	}
	if cfg.From == "" && cfg.MessagingServiceSID == "" {
		cfg.From = testFrom
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

func TestSendWireFormat(t *testing.T) {
	const body = "Your code is 123456. Don't share it – not even with us & co. @example.com #123456"
	tests := []struct {
		name     string
		cfg      Config
		prefix   string // path prefix on APIBase
		wantFrom bool
		callback string
	}{
		{name: "from number", cfg: Config{From: testFrom}, wantFrom: true},
		{name: "messaging service", cfg: Config{MessagingServiceSID: testMG}},
		{name: "status callback", cfg: Config{From: testFrom, StatusCallbackURL: "https://otp.example.com/v1/twilio/status?x=1&y=2"},
			wantFrom: true, callback: "https://otp.example.com/v1/twilio/status?x=1&y=2"},
		{name: "api base with path prefix", cfg: Config{From: testFrom}, prefix: "/edge/twilio", wantFrom: true},
		{name: "api base with path prefix and slash", cfg: Config{MessagingServiceSID: testMG}, prefix: "/edge/twilio/"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeTwilio(t, nil)
			cfg := tc.cfg
			cfg.APIBase = f.srv.URL + tc.prefix
			p := newProvider(t, cfg)

			id, err := p.Send(context.Background(), testTo, body)
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			if id != testMsg {
				t.Errorf("message id = %q, want %q", id, testMsg)
			}
			reqs := f.requests()
			if len(reqs) != 1 {
				t.Fatalf("server saw %d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.method != http.MethodPost {
				t.Errorf("method = %s, want POST", r.method)
			}
			wantPath := strings.TrimRight(tc.prefix, "/") + "/2010-04-01/Accounts/" + testSID + "/Messages.json"
			if r.path != wantPath {
				t.Errorf("path = %q, want %q", r.path, wantPath)
			}
			if want := strings.TrimPrefix(f.srv.URL, "http://"); r.host != want {
				t.Errorf("Host header = %q, want %q (not api.twilio.com)", r.host, want)
			}
			if !r.authOK || r.user != testSID || r.pass != testToken {
				t.Errorf("basic auth = %q:%q (ok %v), want sid:token", r.user, r.pass, r.authOK)
			}
			if r.contentType != "application/x-www-form-urlencoded" {
				t.Errorf("Content-Type = %q", r.contentType)
			}
			if !strings.HasPrefix(r.userAgent, "twilio-go/") || !strings.Contains(r.userAgent, "smsgw") {
				t.Errorf("User-Agent = %q", r.userAgent)
			}
			want := url.Values{"To": {testTo}, "Body": {body}}
			if tc.wantFrom {
				want.Set("From", testFrom)
			} else {
				want.Set("MessagingServiceSid", testMG)
			}
			if tc.callback != "" {
				want.Set("StatusCallback", tc.callback)
			}
			if got := r.form.Encode(); got != want.Encode() {
				t.Errorf("form = %s\n want %s", got, want.Encode())
			}
		})
	}
}

// twilioError is Twilio's error body.
func twilioError(code, status int, message string) string {
	b, _ := json.Marshal(map[string]any{
		"code":      code,
		"message":   message,
		"more_info": fmt.Sprintf("https://www.twilio.com/docs/errors/%d", code),
		"status":    status,
	})
	return string(b)
}

// failureOf is what each not-sent reason means to the router.
var failureOf = map[string]otp.Failure{
	"invalid_number": otp.NumberProblem, "not_mobile": otp.NumberProblem, "region_not_enabled": otp.NumberProblem,
	"unreachable": otp.NumberProblem, "unsubscribed": otp.OptedOut, "auth": otp.ProviderDown,
	"rate_limited": otp.ProviderDown, "refused": otp.ProviderRefused, "provider_5xx": otp.ProviderDown, "network": otp.ProviderDown,
}

func TestSendErrorMapping(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		contentType string
		body        string
		wantReason  string
		wantNotSent bool
		wantCode    int // Twilio code expected as *client.TwilioRestError in the chain, 0: none
	}{
		{"21211 invalid To", 400, "", twilioError(21211, 400, "The 'To' number +15005550001 is not a valid phone number."), "invalid_number", true, 21211},
		{"21614 not mobile", 400, "", twilioError(21614, 400, "'To' number is not a valid mobile number"), "not_mobile", true, 21614},
		{"21408 region", 400, "", twilioError(21408, 400, "Permission to send an SMS has not been enabled for the region indicated by the 'To' number: +8613800138000."), "region_not_enabled", true, 21408},
		{"21612 unreachable", 400, "", twilioError(21612, 400, "The 'To' phone number: +15005550009, is not currently reachable using the 'From' phone number: +15005550006 via SMS."), "unreachable", true, 21612},
		{"21610 STOP", 400, "", twilioError(21610, 400, "Attempt to send to unsubscribed recipient"), "unsubscribed", true, 21610},
		{"20003 auth", 401, "", twilioError(20003, 401, "Authenticate"), "auth", true, 20003},
		{"401 without a Twilio body", 401, "text/html", "<html><body>401 Unauthorized</body></html>", "auth", true, 0},
		{"20429 rate", 429, "", twilioError(20429, 429, "Too Many Requests"), "rate_limited", true, 20429},
		{"429 without a Twilio body", 429, "text/plain", "slow down", "rate_limited", true, 0},
		{"generic 400", 400, "", twilioError(21602, 400, "Message body is required."), "refused", true, 21602},
		{"400 invalid From", 400, "", twilioError(21606, 400, "The From phone number +15005550001 is not a valid, SMS-capable inbound phone number or short code for your account."), "refused", true, 21606},
		{"403", 403, "", twilioError(20008, 403, "Resource not accessible with Test Account Credentials"), "refused", true, 20008},
		{"404 wrong base", 404, "", twilioError(20404, 404, "The requested resource /2010-04-01/Accounts/x/Messages.json was not found"), "refused", true, 20404},
		{"4xx with unknown body", 422, "text/plain", "nope", "refused", true, 0},
		{"500", 500, "", twilioError(20500, 500, "An internal server error has occurred"), "provider_5xx", true, 20500},
		{"500 empty body", 500, "text/plain", "", "provider_5xx", true, 0},
		{"503", 503, "", twilioError(20503, 503, "Service is unavailable. Please try again"), "provider_5xx", true, 20503},
		{"503 html", 503, "text/html", "<html><body><h1>503 Service Unavailable</h1></body></html>", "provider_5xx", true, 0},
		{"502 html gateway", 502, "text/html", "<html><head><title>502 Bad Gateway</title></head><body>502 Bad Gateway</body></html>", "provider_5xx", false, 0},
		{"502 json", 502, "", twilioError(20502, 502, "Bad Gateway"), "provider_5xx", false, 20502},
		{"504 gateway timeout", 504, "text/html", "<html><body>504 Gateway Time-out</body></html>", "provider_5xx", false, 0},
		{"504 carrying a 4xx code", 504, "", twilioError(21211, 504, "odd"), "provider_5xx", false, 21211},
		{"201 without sid", 201, "", `{"status": "queued"}`, "bad_response", false, 0},
		{"201 garbled", 201, "", `{"sid": "SM`, "bad_response", false, 0},
		// Hostile answers: what is not a sid is not kept, whatever it holds.
		{"201 with a NUL in the sid", 201, "", `{"sid": "SM9f8e7d6c5b4a3928\u00001706f5e4d3c2b1a0"}`, "bad_response", false, 0},
		{"201 with a bidi override in the sid", 201, "", `{"sid": "SM9f8e7d6c5b4a3928\u202e706f5e4d3c2b1a0"}`, "bad_response", false, 0},
		{"201 with a sid of the wrong shape", 201, "", `{"sid": "SM-1; DROP TABLE audit_log"}`, "bad_response", false, 0},
		{"201 with a sid of 4000 characters", 201, "", `{"sid": "SM` + strings.Repeat("a", 4000) + `"}`, "bad_response", false, 0},
		{"201 with invalid UTF-8 in the sid", 201, "", "{\"sid\": \"SM9f8e7d6c5b4a39281706f5e4d3c2b1\xff\xfe\"}", "bad_response", false, 0},
		{"21211 with a hostile message", 400, "", twilioError(21211, 400, "bad\x00number\x1b[2J\u202eevil\n"+strings.Repeat("z", 5000)), "invalid_number", true, 21211},
		{"503 with binary junk", 503, "application/octet-stream", "\x00\xff\xfe\x1b[31m", "provider_5xx", true, 0},
		{"301 redirect", 301, "text/html", `<a href="https://api.twilio.com/">Moved</a>`, "refused", true, 0},
		{"302 redirect with json", 302, "", `{}`, "refused", true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeTwilio(t, func(w http.ResponseWriter, r *http.Request) {
				ct := tc.contentType
				if ct == "" {
					ct = "application/json"
				}
				w.Header().Set("Content-Type", ct)
				if tc.status >= 300 && tc.status < 400 {
					w.Header().Set("Location", "https://api.twilio.com/")
				}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			})
			p := newProvider(t, Config{APIBase: f.srv.URL})
			id, err := p.Send(context.Background(), testTo, "Your code is 123456")
			se := sendError(t, id, err)
			if se.Reason != tc.wantReason || se.NotSent() != tc.wantNotSent {
				t.Errorf("got reason %q NotSent %v, want %q %v (err: %v)", se.Reason, se.NotSent(), tc.wantReason, tc.wantNotSent, err)
			}
			if want, ok := failureOf[tc.wantReason]; ok && tc.wantNotSent && se.Failure != want {
				t.Errorf("got failure %v, want %v", se.Failure, want)
			}
			if msg := se.Error(); !utf8.ValidString(msg) || strings.ContainsAny(msg, "\x00\x1b\u202e\n") || len(msg) > 2048 {
				t.Errorf("the error quotes the provider's answer unclean: %q", msg)
			}
			var rest *client.TwilioRestError
			switch {
			case tc.wantCode != 0 && !errors.As(err, &rest):
				t.Errorf("no *client.TwilioRestError in %v", err)
			case tc.wantCode != 0 && rest.Code != tc.wantCode:
				t.Errorf("TwilioRestError code %d, want %d", rest.Code, tc.wantCode)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("server saw %d requests, want exactly 1 (no retries)", n)
			}
		})
	}
}

func sendError(t *testing.T, id string, err error) *otp.SendError {
	t.Helper()
	if err == nil {
		t.Fatalf("Send succeeded with id %q, want an error", id)
	}
	if id != "" {
		t.Errorf("id = %q on error", id)
	}
	var se *otp.SendError
	if !errors.As(err, &se) {
		t.Fatalf("error %T %v is not an *otp.SendError", err, err)
	}
	if se.Err == nil {
		t.Errorf("SendError without the original error")
	}
	return se
}

// hang answers only after the client gave up (or release is closed).
func hang(release <-chan struct{}, got chan<- struct{}) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		if got != nil {
			got <- struct{}{}
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}
}

func TestSendTransportFailures(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })

	tests := []struct {
		name        string
		setup       func(t *testing.T) (base string, ctx context.Context, timeout time.Duration)
		wantReason  string
		wantNotSent bool
		maxElapsed  time.Duration
	}{
		{
			name: "server hangs past the timeout",
			setup: func(t *testing.T) (string, context.Context, time.Duration) {
				f := newFakeTwilio(t, hang(release, nil))
				return f.srv.URL, context.Background(), 200 * time.Millisecond
			},
			wantReason: "timeout", wantNotSent: false, maxElapsed: 3 * time.Second,
		},
		{
			name: "caller deadline shorter than the timeout",
			setup: func(t *testing.T) (string, context.Context, time.Duration) {
				f := newFakeTwilio(t, hang(release, nil))
				ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
				t.Cleanup(cancel)
				return f.srv.URL, ctx, time.Minute
			},
			wantReason: "timeout", wantNotSent: false, maxElapsed: 3 * time.Second,
		},
		{
			name: "caller cancels after the request went out",
			setup: func(t *testing.T) (string, context.Context, time.Duration) {
				got := make(chan struct{}, 1)
				f := newFakeTwilio(t, hang(release, got))
				ctx, cancel := context.WithCancel(context.Background())
				t.Cleanup(cancel)
				go func() {
					<-got
					cancel()
				}()
				return f.srv.URL, ctx, time.Minute
			},
			wantReason: "network", wantNotSent: false, maxElapsed: 3 * time.Second,
		},
		{
			name: "connection dropped after the request was read",
			setup: func(t *testing.T) (string, context.Context, time.Duration) {
				return dropAfterRequest(t), context.Background(), 5 * time.Second
			},
			wantReason: "network", wantNotSent: false, maxElapsed: 3 * time.Second,
		},
		{
			name: "connection refused",
			setup: func(t *testing.T) (string, context.Context, time.Duration) {
				return "http://" + testenv.FreeAddr(t), context.Background(), 5 * time.Second
			},
			wantReason: "network", wantNotSent: true, maxElapsed: 3 * time.Second,
		},
		{
			name: "dns failure",
			setup: func(t *testing.T) (string, context.Context, time.Duration) {
				return "http://api.smsgw-test.invalid", context.Background(), 2 * time.Second
			},
			wantReason: "network", wantNotSent: true, maxElapsed: 4 * time.Second,
		},
		{
			name: "tls handshake failure (untrusted certificate)",
			setup: func(t *testing.T) (string, context.Context, time.Duration) {
				f := &fakeTwilio{}
				f.srv = httptest.NewTLSServer(http.HandlerFunc(f.serve))
				f.srv.Config.ErrorLog = quietLog()
				t.Cleanup(f.srv.Close)
				return f.srv.URL, context.Background(), 5 * time.Second
			},
			wantReason: "network", wantNotSent: true, maxElapsed: 3 * time.Second,
		},
		{
			name: "plain http to a tls server",
			setup: func(t *testing.T) (string, context.Context, time.Duration) {
				srv := httptest.NewTLSServer(http.NotFoundHandler())
				srv.Config.ErrorLog = quietLog()
				t.Cleanup(srv.Close)
				return strings.Replace(srv.URL, "https://", "http://", 1), context.Background(), 5 * time.Second
			},
			// Go's server answers a plain request on a TLS port with a 400.
			wantReason: "refused", wantNotSent: true, maxElapsed: 3 * time.Second,
		},
		{
			name: "context already canceled",
			setup: func(t *testing.T) (string, context.Context, time.Duration) {
				f := newFakeTwilio(t, nil)
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return f.srv.URL, ctx, 5 * time.Second
			},
			wantReason: "network", wantNotSent: true, maxElapsed: time.Second,
		},
		{
			name: "context deadline already passed",
			setup: func(t *testing.T) (string, context.Context, time.Duration) {
				f := newFakeTwilio(t, nil)
				ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
				t.Cleanup(cancel)
				return f.srv.URL, ctx, 5 * time.Second
			},
			wantReason: "network", wantNotSent: true, maxElapsed: time.Second,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base, ctx, timeout := tc.setup(t)
			p := newProvider(t, Config{APIBase: base, Timeout: timeout})
			start := time.Now()
			id, err := p.Send(ctx, testTo, "Your code is 123456")
			elapsed := time.Since(start)
			se := sendError(t, id, err)
			t.Logf("%v after %v", err, elapsed.Round(time.Millisecond))
			if strings.Contains(err.Error(), "api.twilio.com") {
				t.Errorf("error names api.twilio.com, not where the request went: %v", err)
			}
			if se.Reason != tc.wantReason || se.NotSent() != tc.wantNotSent {
				t.Errorf("got reason %q NotSent %v, want %q %v (err: %v)", se.Reason, se.NotSent(), tc.wantReason, tc.wantNotSent, err)
			}
			if elapsed > tc.maxElapsed {
				t.Errorf("Send took %v, want at most %v", elapsed, tc.maxElapsed)
			}
		})
	}
}

// dropAfterRequest is a server that reads one whole request and closes the
// connection without answering: the text may have gone out.
func dropAfterRequest(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				if tc, ok := c.(*net.TCPConn); ok {
					_ = tc.SetLinger(0) // reset, not a clean close
				}
			}()
		}
	}()
	return "http://" + l.Addr().String()
}

func quietLog() *log.Logger { return log.New(io.Discard, "", 0) }

func TestSendContextAlreadyCanceledSendsNothing(t *testing.T) {
	f := newFakeTwilio(t, nil)
	p := newProvider(t, Config{APIBase: f.srv.URL})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Send(ctx, testTo, "x"); err == nil {
		t.Fatal("Send on a canceled context succeeded")
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("server saw %d requests, want 0", n)
	}
}

func TestSendOverTLS(t *testing.T) {
	f := &fakeTwilio{}
	f.srv = httptest.NewTLSServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	p := newProvider(t, Config{APIBase: f.srv.URL + "/v"})
	p.transport = f.srv.Client().Transport // trusts the test certificate
	id, err := p.Send(context.Background(), testTo, "hi")
	if err != nil || id != testMsg {
		t.Fatalf("Send = %q, %v", id, err)
	}
	if reqs := f.requests(); len(reqs) != 1 || reqs[0].path != "/v/2010-04-01/Accounts/"+testSID+"/Messages.json" {
		t.Errorf("requests = %+v", reqs)
	}
}

// TWILIO_EDGE / TWILIO_REGION make twilio-go rewrite the host; api_base wins.
func TestSendIgnoresEdgeEnv(t *testing.T) {
	t.Setenv("TWILIO_EDGE", "sydney")
	t.Setenv("TWILIO_REGION", "au1")
	f := newFakeTwilio(t, nil)
	p := newProvider(t, Config{APIBase: f.srv.URL})
	if _, err := p.Send(context.Background(), testTo, "hi"); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if n := len(f.requests()); n != 1 {
		t.Fatalf("server saw %d requests", n)
	}
}

func TestSendConcurrent(t *testing.T) {
	f := newFakeTwilio(t, nil)
	p := newProvider(t, Config{APIBase: f.srv.URL, Timeout: 5 * time.Second})
	testenv.Race(t, 32, func(i int) string {
		to := fmt.Sprintf("+1415555%04d", i)
		if _, err := p.Send(context.Background(), to, "hi"); err != nil {
			t.Error(err)
		}
		return ""
	})
	if n := len(f.requests()); n != 32 {
		t.Errorf("server saw %d requests, want 32", n)
	}
}

func TestNewValidation(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantKey string // "" means valid
	}{
		{"valid from", Config{AccountSID: testSID, AuthToken: testToken, From: testFrom}, ""},
		{"valid messaging service", Config{AccountSID: testSID, AuthToken: testToken, MessagingServiceSID: testMG}, ""},
		{"valid alphanumeric sender", Config{AccountSID: testSID, AuthToken: testToken, From: "ACMEBank"}, ""},
		{"valid regional base", Config{AccountSID: testSID, AuthToken: testToken, From: testFrom, APIBase: "https://api.dublin.ie1.twilio.com/"}, ""},
		{"valid base with prefix", Config{AccountSID: testSID, AuthToken: testToken, From: testFrom, APIBase: "http://127.0.0.1:8089/twilio"}, ""},
		{"missing sid", Config{AuthToken: testToken, From: testFrom}, "TWILIO_ACCOUNT_SID"},
		{"bad sid", Config{AccountSID: "SK0123456789abcdef0123456789abcdef", AuthToken: testToken, From: testFrom}, "TWILIO_ACCOUNT_SID"},
		{"short sid", Config{AccountSID: "AC123", AuthToken: testToken, From: testFrom}, "TWILIO_ACCOUNT_SID"},
		{"missing token", Config{AccountSID: testSID, From: testFrom}, "TWILIO_AUTH_TOKEN"},
		{"token with symbols", Config{AccountSID: testSID, AuthToken: "abc:def", From: testFrom}, "TWILIO_AUTH_TOKEN"},
		{"neither from nor service", Config{AccountSID: testSID, AuthToken: testToken}, "sender.twilio.from"},
		{"both from and service", Config{AccountSID: testSID, AuthToken: testToken, From: testFrom, MessagingServiceSID: testMG}, "sender.twilio.from"},
		{"blank from", Config{AccountSID: testSID, AuthToken: testToken, From: "  "}, "sender.twilio.from"},
		{"token with a newline", Config{AccountSID: testSID, AuthToken: testToken + "\n", From: testFrom}, "TWILIO_AUTH_TOKEN"},
		{"sid with a space", Config{AccountSID: " " + testSID, AuthToken: testToken, From: testFrom}, "TWILIO_ACCOUNT_SID"},
		{"callback with a space", Config{AccountSID: testSID, AuthToken: testToken, From: testFrom, StatusCallbackURL: "https://x.example.com/cb "}, "sender.twilio.status_callback_url"},
		{"bad service sid", Config{AccountSID: testSID, AuthToken: testToken, MessagingServiceSID: "PN00112233445566778899aabbccddeeff"}, "sender.twilio.messaging_service_sid"},
		{"base not a url", Config{AccountSID: testSID, AuthToken: testToken, From: testFrom, APIBase: "://nope"}, "sender.twilio.api_base"},
		{"base without scheme", Config{AccountSID: testSID, AuthToken: testToken, From: testFrom, APIBase: "api.twilio.com"}, "sender.twilio.api_base"},
		{"base ftp", Config{AccountSID: testSID, AuthToken: testToken, From: testFrom, APIBase: "ftp://api.twilio.com"}, "sender.twilio.api_base"},
		{"base without host", Config{AccountSID: testSID, AuthToken: testToken, From: testFrom, APIBase: "https:///x"}, "sender.twilio.api_base"},
		{"base with query", Config{AccountSID: testSID, AuthToken: testToken, From: testFrom, APIBase: "https://api.twilio.com/?a=b"}, "sender.twilio.api_base"},
		{"base with user info", Config{AccountSID: testSID, AuthToken: testToken, From: testFrom, APIBase: "https://u:p@api.twilio.com"}, "sender.twilio.api_base"},
		{"bad callback", Config{AccountSID: testSID, AuthToken: testToken, From: testFrom, StatusCallbackURL: "/relative"}, "sender.twilio.status_callback_url"},
		{"negative timeout", Config{AccountSID: testSID, AuthToken: testToken, From: testFrom, Timeout: -time.Second}, "sender.timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.cfg)
			if tc.wantKey == "" {
				if err != nil || p == nil {
					t.Fatalf("New = %v, %v; want a provider", p, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("New accepted %+v, want an error naming %s", tc.cfg, tc.wantKey)
			}
			if !strings.HasPrefix(err.Error(), tc.wantKey+":") {
				t.Errorf("error %q does not start with the key %q", err, tc.wantKey)
			}
		})
	}
}

func TestNewDefaults(t *testing.T) {
	p := newProvider(t, Config{})
	if p.base.String() != DefaultAPIBase {
		t.Errorf("base = %s, want %s", p.base, DefaultAPIBase)
	}
	if p.timeout != DefaultTimeout {
		t.Errorf("timeout = %v, want %v", p.timeout, DefaultTimeout)
	}
}

func statusParams() map[string]string {
	return map[string]string{
		"AccountSid":    testSID,
		"ApiVersion":    "2010-04-01",
		"From":          testFrom,
		"MessageSid":    testMsg,
		"MessageStatus": "delivered",
		"SmsSid":        testMsg,
		"SmsStatus":     "delivered",
		"To":            testTo,
	}
}

func TestValidSignature(t *testing.T) {
	const hookURL = "https://otp.example.com/v1/twilio/status?tenant=a&x=1"
	good := twiliotest.Sign(testToken, hookURL, statusParams())

	// A known-answer vector from Twilio's documentation / twilio-go's tests,
	// to make sure sign itself is right.
	doc := map[string]string{"Digits": "1234", "CallSid": "CA1234567890ABCDE", "To": "+18005551212",
		"Caller": "+14158675309", "From": "+14158675309", "ReasonConferenceEnded": "test", "Reason": "Participant"}
	if got := twiliotest.Sign("12345", "https://mycompany.com/myapp.php?foo=1&bar=2", doc); got != "vOEb5UThFn24KEfnOFLQY2AE5FY=" {
		t.Fatalf("independent signer disagrees with the documented vector: %s", got)
	}

	changed := statusParams()
	changed["MessageStatus"] = "failed"
	extra := statusParams()
	extra["ErrorCode"] = "30003"

	tests := []struct {
		name, token, url string
		params           map[string]string
		sig              string
		want             bool
	}{
		{"valid", testToken, hookURL, statusParams(), good, true},
		{"valid, url with default port", testToken, "https://otp.example.com:443/v1/twilio/status?tenant=a&x=1", statusParams(), good, true},
		{"valid, no params", testToken, hookURL, map[string]string{}, twiliotest.Sign(testToken, hookURL, nil), true},
		{"wrong token", "00000000000000000000000000000000", hookURL, statusParams(), good, false},
		{"signed with another token", testToken, hookURL, statusParams(), twiliotest.Sign("other", hookURL, statusParams()), false},
		{"changed param", testToken, hookURL, changed, good, false},
		{"added param", testToken, hookURL, extra, good, false},
		{"changed path", testToken, "https://otp.example.com/v1/twilio/status2?tenant=a&x=1", statusParams(), good, false},
		{"changed query", testToken, "https://otp.example.com/v1/twilio/status?tenant=b&x=1", statusParams(), good, false},
		{"changed host", testToken, "https://evil.example.com/v1/twilio/status?tenant=a&x=1", statusParams(), good, false},
		{"http instead of https", testToken, strings.Replace(hookURL, "https", "http", 1), statusParams(), good, false},
		{"empty signature", testToken, hookURL, statusParams(), "", false},
		{"garbage signature", testToken, hookURL, statusParams(), "not-base64!!", false},
		{"empty token", "", hookURL, statusParams(), twiliotest.Sign("", hookURL, statusParams()), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ValidSignature(tc.token, tc.url, tc.params, tc.sig); got != tc.want {
				t.Errorf("ValidSignature = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseStatus(t *testing.T) {
	with := func(kv ...string) map[string]string {
		m := statusParams()
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "<del>" {
				delete(m, kv[i])
			} else {
				m[kv[i]] = kv[i+1]
			}
		}
		return m
	}
	tests := []struct {
		name    string
		params  map[string]string
		want    StatusUpdate
		wantErr bool
	}{
		{"delivered", statusParams(), StatusUpdate{MessageSID: testMsg, Status: "delivered"}, false},
		{"undelivered with code", with("MessageStatus", "undelivered", "ErrorCode", "30003"),
			StatusUpdate{MessageSID: testMsg, Status: "undelivered", ErrorCode: "30003"}, false},
		{"failed with code", with("MessageStatus", "failed", "ErrorCode", "30007"),
			StatusUpdate{MessageSID: testMsg, Status: "failed", ErrorCode: "30007"}, false},
		{"mms sid", with("MessageSid", "MM"+testMsg[2:], "MessageStatus", "sent"),
			StatusUpdate{MessageSID: "MM" + testMsg[2:], Status: "sent"}, false},
		{"legacy names only", with("MessageSid", "<del>", "MessageStatus", "<del>", "SmsStatus", "sent"),
			StatusUpdate{MessageSID: testMsg, Status: "sent"}, false},
		{"every status: queued", with("MessageStatus", "queued"), StatusUpdate{MessageSID: testMsg, Status: "queued"}, false},
		{"every status: accepted", with("MessageStatus", "accepted"), StatusUpdate{MessageSID: testMsg, Status: "accepted"}, false},
		{"every status: scheduled", with("MessageStatus", "scheduled"), StatusUpdate{MessageSID: testMsg, Status: "scheduled"}, false},
		{"every status: sending", with("MessageStatus", "sending"), StatusUpdate{MessageSID: testMsg, Status: "sending"}, false},
		{"every status: read", with("MessageStatus", "read"), StatusUpdate{MessageSID: testMsg, Status: "read"}, false},
		{"every status: canceled", with("MessageStatus", "canceled"), StatusUpdate{MessageSID: testMsg, Status: "canceled"}, false},
		{"every status: receiving", with("MessageStatus", "receiving"), StatusUpdate{MessageSID: testMsg, Status: "receiving"}, false},
		{"every status: received", with("MessageStatus", "received"), StatusUpdate{MessageSID: testMsg, Status: "received"}, false},
		{"missing sid", with("MessageSid", "<del>", "SmsSid", "<del>"), StatusUpdate{}, true},
		{"sid wrong prefix", with("MessageSid", "CA"+testMsg[2:]), StatusUpdate{}, true},
		{"sid too short", with("MessageSid", testMsg[:33]), StatusUpdate{}, true},
		{"sid too long", with("MessageSid", testMsg+"0"), StatusUpdate{}, true},
		{"sid not alphanumeric", with("MessageSid", testMsg[:33]+"-"), StatusUpdate{}, true},
		{"sid injection", with("MessageSid", "SM' OR 1=1 --"), StatusUpdate{}, true},
		{"missing status", with("MessageStatus", "<del>", "SmsStatus", "<del>"), StatusUpdate{}, true},
		{"unknown status", with("MessageStatus", "exploded"), StatusUpdate{}, true},
		{"status wrong case", with("MessageStatus", "Delivered"), StatusUpdate{}, true},
		{"error code not a number", with("MessageStatus", "failed", "ErrorCode", "30003x"), StatusUpdate{}, true},
		{"empty", map[string]string{}, StatusUpdate{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseStatus(tc.params)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ParseStatus = %+v, want an error", got)
				}
				if !errors.Is(err, ErrInvalidStatus) {
					t.Errorf("error %v does not wrap ErrInvalidStatus", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseStatus: %v", err)
			}
			if got != tc.want {
				t.Errorf("ParseStatus = %+v, want %+v", got, tc.want)
			}
		})
	}
}
