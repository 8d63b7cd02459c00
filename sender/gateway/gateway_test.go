package gateway

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"smsgw/internal/testenv"
	"smsgw/otp"
)

const testSecret = "0123456789abcdef0123456789abcdef-test"

// seen is one request as the gateway received it.
type seen struct {
	Method, Path, ContentType, Timestamp, Signature, IdempotencyKey string
	Raw                                                             []byte
	Req                                                             request
}

// recorder is a fake gateway: it records every request, then answers with
// answer (200 {"id":"gw-1"} when nil).
type recorder struct {
	mu     sync.Mutex
	got    []seen
	answer func(w http.ResponseWriter, r *http.Request, s seen)
}

func (g *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	s := seen{
		Method: r.Method, Path: r.URL.Path, ContentType: r.Header.Get("Content-Type"),
		Timestamp: r.Header.Get(HeaderTimestamp), Signature: r.Header.Get(HeaderSignature),
		IdempotencyKey: r.Header.Get(HeaderIdempotencyKey), Raw: raw,
	}
	json.Unmarshal(raw, &s.Req)
	g.mu.Lock()
	g.got = append(g.got, s)
	g.mu.Unlock()
	if g.answer == nil {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"gw-1"}`)
		return
	}
	g.answer(w, r, s)
}

func (g *recorder) requests() []seen {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]seen(nil), g.got...)
}

func newProvider(t *testing.T, url string, timeout time.Duration, client *http.Client) *Provider {
	t.Helper()
	p, err := New(Config{URL: url, Secret: testSecret, Timeout: timeout}, client)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// failureOf is what each not-sent reason means to the router.
var failureOf = map[string]otp.Failure{
	"rate_limited": otp.ProviderDown, "auth": otp.ProviderDown, "refused": otp.ProviderRefused,
	"provider_5xx": otp.ProviderDown, "network": otp.ProviderDown,
}

// sendError asserts err is an *otp.SendError with reason and notSent.
func sendError(t *testing.T, err error, reason string, notSent bool) *otp.SendError {
	t.Helper()
	var se *otp.SendError
	if !errors.As(err, &se) {
		t.Fatalf("error %v (%T), want an *otp.SendError", err, err)
	}
	if se.Reason != reason || se.NotSent() != notSent {
		t.Fatalf("reason %q notSent %v (%v), want %q notSent %v", se.Reason, se.NotSent(), err, reason, notSent)
	}
	if want, ok := failureOf[reason]; ok && notSent && se.Failure != want {
		t.Fatalf("failure %v, want %v", se.Failure, want)
	}
	if se.Err == nil {
		t.Fatal("SendError without the original error")
	}
	return se
}

func TestWireFormat(t *testing.T) {
	g := &recorder{}
	srv := httptest.NewServer(g)
	defer srv.Close()
	p := newProvider(t, srv.URL+"/sms/send", 0, nil)

	before := time.Now().Unix()
	id, err := p.Send(context.Background(), "+14155552671", "Your code is 123456 \"quoted\" é")
	after := time.Now().Unix()
	if err != nil {
		t.Fatal(err)
	}
	if id != "gw-1" {
		t.Fatalf("message id %q, want the gateway's gw-1", id)
	}
	if _, err := p.Send(context.Background(), "+14155552671", "again"); err != nil {
		t.Fatal(err)
	}
	got := g.requests()
	if len(got) != 2 {
		t.Fatalf("%d requests, want 2", len(got))
	}
	s := got[0]

	t.Run("request line and content type", func(t *testing.T) {
		if s.Method != http.MethodPost || s.Path != "/sms/send" {
			t.Fatalf("%s %s, want POST /sms/send", s.Method, s.Path)
		}
		if s.ContentType != "application/json" {
			t.Fatalf("content type %q", s.ContentType)
		}
	})
	t.Run("json fields", func(t *testing.T) {
		var fields map[string]any
		if err := json.Unmarshal(s.Raw, &fields); err != nil {
			t.Fatalf("body %q: %v", s.Raw, err)
		}
		if len(fields) != 3 || fields["to"] != "+14155552671" || fields["body"] != "Your code is 123456 \"quoted\" é" {
			t.Fatalf("body %s", s.Raw)
		}
		if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(s.Req.ID) {
			t.Fatalf("id %q, want 128 random bits in hex", s.Req.ID)
		}
		if got[1].Req.ID == s.Req.ID {
			t.Fatalf("two sends share the id %q", s.Req.ID)
		}
	})
	t.Run("idempotency key is the id", func(t *testing.T) {
		for _, r := range got {
			if r.IdempotencyKey == "" || r.IdempotencyKey != r.Req.ID {
				t.Fatalf("Idempotency-Key %q, body id %q", r.IdempotencyKey, r.Req.ID)
			}
		}
	})
	t.Run("timestamp is now", func(t *testing.T) {
		ts, err := strconv.ParseInt(s.Timestamp, 10, 64)
		if err != nil || ts < before || ts > after {
			t.Fatalf("timestamp %q, want unix seconds in [%d, %d]", s.Timestamp, before, after)
		}
	})
	t.Run("signature by an independent HMAC", func(t *testing.T) {
		m := hmac.New(sha256.New, []byte(testSecret))
		m.Write([]byte(s.Timestamp + "." + string(s.Raw)))
		if want := "v1=" + hex.EncodeToString(m.Sum(nil)); s.Signature != want {
			t.Fatalf("signature %q, want %q", s.Signature, want)
		}
	})
	t.Run("signature passes Verify", func(t *testing.T) {
		for _, r := range got {
			if err := Verify(testSecret, r.Timestamp, r.Signature, r.Raw, time.Now(), time.Minute); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestMessageIDFromTheAnswer(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		want   string // "" means the id we sent
	}{
		{"string id", 200, `{"id":"gw-42","status":"queued"}`, "gw-42"},
		{"numeric id", 202, `{"id": 9007199254740993}`, "9007199254740993"},
		{"201 created", 201, `{"id":"c-1"}`, "c-1"},
		{"no id", 200, `{"status":"queued"}`, ""},
		{"empty id", 200, `{"id":""}`, ""},
		{"null id", 200, `{"id":null}`, ""},
		{"no body", 204, ``, ""},
		{"not json", 200, `OK`, ""},
		{"json array", 200, `["gw-1"]`, ""},
		{"id too long to keep", 200, `{"id":"` + strings.Repeat("x", 300) + `"}`, ""},
		// Hostile ids are not kept: ours names the text instead.
		{"id with a NUL", 200, `{"id":"gw\u0000-1"}`, ""},
		{"id with invalid UTF-8", 200, "{\"id\":\"gw\xff\xfe\"}", ""},
		{"id with a control character", 200, `{"id":"gw\u001b[31m"}`, ""},
		{"id with a right-to-left override", 200, `{"id":"gw\u202e1-wg"}`, ""},
		{"id with a newline", 200, `{"id":"gw-1\nsent=false"}`, ""},
		{"id with inner spaces", 200, `{"id":"gw 1"}`, ""},
		{"answer past the 64 KiB bound", 200, `{"pad":"` + strings.Repeat("x", 70<<10) + `","id":"far"}`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := &recorder{answer: func(w http.ResponseWriter, _ *http.Request, _ seen) {
				w.WriteHeader(c.status)
				io.WriteString(w, c.body)
			}}
			srv := httptest.NewServer(g)
			defer srv.Close()
			id, err := newProvider(t, srv.URL, 0, nil).Send(context.Background(), "+14155552671", "x")
			if err != nil {
				t.Fatalf("%v, want the text accepted", err)
			}
			want := c.want
			if want == "" {
				want = g.requests()[0].Req.ID
			}
			if id != want {
				t.Fatalf("message id %q, want %q", id, want)
			}
		})
	}
}

// An error answer's body reaches logs only cleaned: valid UTF-8, no NUL,
// control or bidi characters, bounded.
func TestHostileErrorBodyIsCleaned(t *testing.T) {
	for _, body := range []string{
		"\x00\x00\x00",
		"\xff\xfe not UTF-8",
		"\x1b[2J\x1b[31mred\r\nX-Injected: yes",
		"\u202eevil\u2066isolated\u2069",
		strings.Repeat("\u202e", 10_000),
	} {
		t.Run(strconv.Quote(body[:min(len(body), 12)]), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusBadRequest)
				io.WriteString(w, body)
			}))
			defer srv.Close()
			_, err := newProvider(t, srv.URL, 0, nil).Send(context.Background(), "+14155552671", "x")
			se := sendError(t, err, "refused", true)
			for _, msg := range []string{se.Error(), se.Err.Error()} {
				if !utf8.ValidString(msg) || strings.ContainsAny(msg, "\x00\x1b\r\n\u202e\u2066") || len(msg) > 1024 {
					t.Fatalf("unclean: %q", msg)
				}
			}
		})
	}
}

func TestStatusMapping(t *testing.T) {
	cases := []struct {
		status  int
		reason  string
		notSent bool
	}{
		{400, "refused", true},
		{401, "auth", true},
		{403, "auth", true},
		{404, "refused", true},
		{422, "refused", true},
		{429, "rate_limited", true},
		{408, "timeout", false},
		{500, "provider_5xx", true},
		{503, "provider_5xx", true},
		{501, "provider_5xx", false},
		{502, "provider_5xx", false},
		{504, "provider_5xx", false},
		{599, "provider_5xx", false},
		{302, "unexpected_status", false},
		{303, "unexpected_status", false},
		{307, "unexpected_status", false},
	}
	for _, c := range cases {
		t.Run(strconv.Itoa(c.status), func(t *testing.T) {
			mux := http.NewServeMux()
			var redirected atomic.Bool
			mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, _ *http.Request) {
				redirected.Store(true)
				io.WriteString(w, `{"id":"wrong"}`)
			})
			mux.Handle("/", &recorder{answer: func(w http.ResponseWriter, _ *http.Request, _ seen) {
				if c.status >= 300 && c.status < 400 {
					w.Header().Set("Location", "/elsewhere")
				}
				w.WriteHeader(c.status)
				io.WriteString(w, `{"error":"no"}`)
			}})
			srv := httptest.NewServer(mux)
			defer srv.Close()
			// A client that would follow redirects: the provider must not.
			_, err := newProvider(t, srv.URL+"/", 0, &http.Client{}).Send(context.Background(), "+14155552671", "x")
			se := sendError(t, err, c.reason, c.notSent)
			var st *StatusError
			if !errors.As(se, &st) || st.StatusCode != c.status || st.Body != `{"error":"no"}` {
				t.Fatalf("Err %v, want a StatusError %d with the body", se.Err, c.status)
			}
			if redirected.Load() {
				t.Fatal("the redirect was followed")
			}
		})
	}
}

// hijack answers by taking the raw connection, after the whole request was
// read.
func hijack(t *testing.T, then func(net.Conn)) *httptest.Server {
	t.Helper()
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		then(conn)
		conn.Close()
	}))
}

func TestTransportFailures(t *testing.T) {
	cases := []struct {
		name    string
		timeout time.Duration
		client  *http.Client
		// server returns the URL and a function that reports whether the
		// gateway received the request.
		server  func(t *testing.T) (url string, received func() bool)
		ctx     func(t *testing.T) context.Context
		reason  string
		notSent bool
	}{
		{
			name: "closed port",
			server: func(t *testing.T) (string, func() bool) {
				return "http://" + testenv.FreeAddr(t) + "/", func() bool { return false }
			},
			reason: "network", notSent: true,
		},
		{
			name: "tls handshake fails",
			server: func(t *testing.T) (string, func() bool) {
				g := &recorder{}
				srv := httptest.NewUnstartedServer(g)
				srv.Config.ErrorLog = log.New(io.Discard, "", 0)
				srv.StartTLS() // its certificate is not trusted by the default client
				t.Cleanup(srv.Close)
				return srv.URL, func() bool { return len(g.requests()) > 0 }
			},
			reason: "network", notSent: true,
		},
		{
			name: "context canceled before sending",
			server: func(t *testing.T) (string, func() bool) {
				g := &recorder{}
				srv := httptest.NewServer(g)
				t.Cleanup(srv.Close)
				return srv.URL, func() bool { return len(g.requests()) > 0 }
			},
			ctx: func(t *testing.T) context.Context {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx
			},
			reason: "network", notSent: true,
		},
		{
			name:    "hanging gateway past the timeout (default client)",
			timeout: 150 * time.Millisecond,
			server:  hanging,
			reason:  "timeout", notSent: false,
		},
		{
			name:    "hanging gateway past the timeout (client without its own timeout)",
			timeout: 150 * time.Millisecond,
			client:  &http.Client{},
			server:  hanging,
			reason:  "timeout", notSent: false,
		},
		{
			name:    "headers sent, body never finishes",
			timeout: 150 * time.Millisecond,
			server: func(t *testing.T) (string, func() bool) {
				release := make(chan struct{})
				srv := hijack(t, func(c net.Conn) {
					io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 1000\r\n\r\n{")
					select {
					case <-release:
					case <-time.After(5 * time.Second):
					}
				})
				t.Cleanup(func() { close(release); srv.Close() })
				return srv.URL, func() bool { return true }
			},
			reason: "provider_5xx", notSent: false,
		},
		{
			name: "connection reset after the request was read",
			server: func(t *testing.T) (string, func() bool) {
				srv := hijack(t, func(c net.Conn) {
					if tc, ok := c.(*net.TCPConn); ok {
						tc.SetLinger(0) // RST, not FIN
					}
				})
				t.Cleanup(srv.Close)
				return srv.URL, func() bool { return true }
			},
			reason: "timeout", notSent: false,
		},
		{
			name: "connection closed without an answer",
			server: func(t *testing.T) (string, func() bool) {
				srv := hijack(t, func(net.Conn) {})
				t.Cleanup(srv.Close)
				return srv.URL, func() bool { return true }
			},
			reason: "timeout", notSent: false,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			url, received := c.server(t)
			ctx := context.Background()
			if c.ctx != nil {
				ctx = c.ctx(t)
			}
			p := newProvider(t, url, c.timeout, c.client)
			start := time.Now()
			_, err := p.Send(ctx, "+14155552671", "x")
			sendError(t, err, c.reason, c.notSent)
			if c.notSent && received() {
				t.Fatal("reported not sent, yet the gateway got the request")
			}
			if c.timeout > 0 && time.Since(start) > c.timeout+2*time.Second {
				t.Fatalf("took %v with a %v timeout", time.Since(start), c.timeout)
			}
		})
	}
}

// hanging is a gateway that takes the request and does not answer until the
// test ends, or for 5s: a send that outlives its timeout then fails fast
// instead of hanging the test.
func hanging(t *testing.T) (string, func() bool) {
	got := make(chan struct{}, 1)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		select {
		case got <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	return srv.URL, func() bool { return len(got) > 0 }
}

func TestCanceledAfterTheRequestWentOutIsUnknown(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		close(entered)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-entered
		cancel()
	}()
	_, err := newProvider(t, srv.URL, 0, nil).Send(ctx, "+14155552671", "x")
	sendError(t, err, "timeout", false)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%v, want the cancellation kept as the cause", err)
	}
}

func TestTwoHundredWithABodyCutShortIsAccepted(t *testing.T) {
	srv := hijack(t, func(c net.Conn) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"id\":\"gw")
	})
	defer srv.Close()
	p := newProvider(t, srv.URL, 0, nil)
	id, err := p.Send(context.Background(), "+14155552671", "x")
	if err != nil || !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(id) {
		t.Fatalf("%q %v, want the text accepted under our id", id, err)
	}
}

func TestConfigValidation(t *testing.T) {
	good := Config{URL: "https://sms.internal.example/v1/send", Secret: testSecret, Timeout: 5 * time.Second}
	cases := []struct {
		name    string
		edit    func(*Config)
		wantErr string // "" means valid
	}{
		{"valid https", func(*Config) {}, ""},
		{"valid http with port", func(c *Config) { c.URL = "http://10.0.0.5:8080/send" }, ""},
		{"zero timeout takes the default", func(c *Config) { c.Timeout = 0 }, ""},
		{"empty url", func(c *Config) { c.URL = "" }, "sender.http.url"},
		{"no scheme", func(c *Config) { c.URL = "sms.internal.example/send" }, "sender.http.url"},
		{"relative path", func(c *Config) { c.URL = "/send" }, "sender.http.url"},
		{"other scheme", func(c *Config) { c.URL = "ftp://sms.internal.example/send" }, "sender.http.url"},
		{"no host", func(c *Config) { c.URL = "http:///send" }, "sender.http.url"},
		{"opaque", func(c *Config) { c.URL = "http:sms.internal.example" }, "sender.http.url"},
		{"unparsable", func(c *Config) { c.URL = "http://[::1" }, "sender.http.url"},
		{"empty secret", func(c *Config) { c.Secret = "" }, "SMSGW_HTTP_SECRET"},
		{"short secret", func(c *Config) { c.Secret = strings.Repeat("s", MinSecretLength-1) }, "SMSGW_HTTP_SECRET"},
		{"negative timeout", func(c *Config) { c.Timeout = -time.Second }, "sender.http.timeout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := good
			c.edit(&cfg)
			p, err := New(cfg, nil)
			if c.wantErr == "" {
				if err != nil || p == nil {
					t.Fatalf("%v, want valid", err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), c.wantErr+":") {
				t.Fatalf("error %v, want one naming %s", err, c.wantErr)
			}
			if cfg.Secret != "" && strings.Contains(err.Error(), cfg.Secret) {
				t.Fatalf("error %v shows the secret", err)
			}
		})
	}
}

func TestVerify(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	body := []byte(`{"id":"abc","to":"+14155552671","body":"Your code is 123456"}`)
	sig := sign([]byte(testSecret), ts, body)
	old := strconv.FormatInt(now.Add(-10*time.Minute).Unix(), 10)
	recent := strconv.FormatInt(now.Add(-4*time.Minute).Unix(), 10)
	future := strconv.FormatInt(now.Add(10*time.Minute).Unix(), 10)

	cases := []struct {
		name            string
		secret, ts, sig string
		body            []byte
		tolerance       time.Duration
		want            error // nil means accepted
	}{
		{"valid", testSecret, ts, sig, body, time.Minute, nil},
		{"valid, zero tolerance means the default", testSecret, ts, sig, body, 0, nil},
		{"within the tolerance", testSecret, recent, sign([]byte(testSecret), recent, body), body, 5 * time.Minute, nil},
		{"one of several signatures matches", testSecret, ts, "v1=" + strings.Repeat("00", 32) + ", " + sig + ",v0=zz", body, time.Minute, nil},
		{"wrong secret", testSecret + "x", ts, sig, body, time.Minute, ErrSignature},
		{"changed body", testSecret, ts, sig, []byte(strings.Replace(string(body), "123456", "654321", 1)), time.Minute, ErrSignature},
		{"timestamp changed (replay with a fresh timestamp)", testSecret, strconv.FormatInt(now.Unix()+1, 10), sig, body, time.Minute, ErrSignature},
		{"stale timestamp, correctly signed", testSecret, old, sign([]byte(testSecret), old, body), body, 5 * time.Minute, ErrStale},
		{"future timestamp, correctly signed", testSecret, future, sign([]byte(testSecret), future, body), body, 5 * time.Minute, ErrStale},
		{"stale under the default tolerance", testSecret, old, sign([]byte(testSecret), old, body), body, 0, ErrStale},
		{"empty signature", testSecret, ts, "", body, time.Minute, ErrMalformed},
		{"no v1 scheme", testSecret, ts, strings.TrimPrefix(sig, "v1="), body, time.Minute, ErrMalformed},
		{"other scheme", testSecret, ts, "v0=" + strings.TrimPrefix(sig, "v1="), body, time.Minute, ErrMalformed},
		{"not hex", testSecret, ts, "v1=" + strings.Repeat("zz", 32), body, time.Minute, ErrMalformed},
		{"too short", testSecret, ts, sig[:len(sig)-2], body, time.Minute, ErrMalformed},
		{"empty timestamp", testSecret, "", sig, body, time.Minute, ErrMalformed},
		{"timestamp not a number", testSecret, "yesterday", sig, body, time.Minute, ErrMalformed},
		{"signed timestamp", testSecret, "+" + ts, sign([]byte(testSecret), "+"+ts, body), body, time.Minute, ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Verify(c.secret, c.ts, c.sig, c.body, now, c.tolerance)
			if c.want == nil {
				if err != nil {
					t.Fatalf("%v, want accepted", err)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("%v, want %v", err, c.want)
			}
		})
	}
	if err := Verify("", ts, sig, body, now, time.Minute); err == nil {
		t.Fatal("an empty secret verified a signature")
	}
}
