package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fake is smsgw as a test scripts it: each try is answered by the next
// handler (the last one repeats), and every try's request is kept.
type fake struct {
	*httptest.Server
	mu    sync.Mutex
	tries []*http.Request
	body  []string
	steps []http.HandlerFunc
}

func newFake(t *testing.T, steps ...http.HandlerFunc) *fake {
	t.Helper()
	f := &fake{steps: steps}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		n := len(f.tries)
		f.tries = append(f.tries, r)
		f.body = append(f.body, string(b))
		f.mu.Unlock()
		f.steps[min(n, len(f.steps)-1)](w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fake) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.tries)
}

// reply writes status, headers (name, value pairs) and body.
func reply(status int, body string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		if body != "" && w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// hangUp closes the connection without answering: the request reached the
// server and no answer came.
func hangUp(w http.ResponseWriter, _ *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

const accepted = `{"id":"req-1","verification_id":"ver_1","phone":"+14155550100","status":"pending","expires_in":600}`

// testClient is a client of f whose waits are recorded, not slept.
func testClient(t *testing.T, url string, opts ...Option) (*Client, *[]time.Duration) {
	t.Helper()
	c, err := New(url, append([]Option{WithAPIKey("secret-key"), WithRetries(3, 100*time.Millisecond, 5*time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	waits := &[]time.Duration{}
	c.sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		*waits = append(*waits, d)
		return ctx.Err()
	}
	return c, waits
}

func TestSendForwardsAndAnswers(t *testing.T) {
	f := newFake(t, reply(202, accepted, "Idempotent-Replayed", "true"))
	c, _ := testClient(t, f.URL)
	res, err := c.Send(context.Background(), SendRequest{Phone: "+1 415 555 0100", ClientIP: "203.0.113.7",
		LimitKeys: map[string]string{"user_id": "u_1"}})
	if err != nil {
		t.Fatal(err)
	}
	want := SendResult{RequestID: "req-1", VerificationID: "ver_1", Phone: "+14155550100", Status: "pending",
		ExpiresIn: 10 * time.Minute, Replayed: true, IdempotencyKey: res.IdempotencyKey}
	if res != want {
		t.Fatalf("got %+v, want %+v", res, want)
	}
	r := f.tries[0]
	if r.Method != "POST" || r.URL.Path != "/v1/otp/send" || r.Header.Get("Authorization") != "Bearer secret-key" ||
		r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("request: %s %s %v", r.Method, r.URL, r.Header)
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(r.Header.Get("Idempotency-Key")) {
		t.Fatalf("Idempotency-Key %q is not a UUID", r.Header.Get("Idempotency-Key"))
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(f.body[0]), &body); err != nil {
		t.Fatal(err)
	}
	if body["client_ip"] != "203.0.113.7" || body["limit_keys"].(map[string]any)["user_id"] != "u_1" || body["phone"] != "+1 415 555 0100" {
		t.Fatalf("body %s", f.body[0])
	}
	if _, ok := body["region"]; ok {
		t.Fatalf("an empty field was sent: %s", f.body[0])
	}
}

// TestSendRetriesWithOneKey: no answer, then 503 with Retry-After, then
// 202: three tries with one Idempotency-Key, the Retry-After waited out.
func TestSendRetriesWithOneKey(t *testing.T) {
	f := newFake(t, hangUp,
		reply(503, `{"error":{"code":"unavailable","message":"Redis is unreachable"}}`, "Retry-After", "2"),
		reply(202, accepted))
	c, waits := testClient(t, f.URL)
	res, err := c.Send(context.Background(), SendRequest{Phone: "+14155550100"})
	if err != nil {
		t.Fatal(err)
	}
	if f.count() != 3 {
		t.Fatalf("%d tries, want 3", f.count())
	}
	for _, r := range f.tries {
		if k := r.Header.Get("Idempotency-Key"); k != res.IdempotencyKey {
			t.Fatalf("a try with key %q, the call's is %q", k, res.IdempotencyKey)
		}
	}
	if len(*waits) != 2 || (*waits)[1] < 2*time.Second {
		t.Fatalf("waits %v: want two, the second at least Retry-After (2 s)", *waits)
	}
	// A key of the caller's own is used as it is.
	if res, err := c.Send(context.Background(), SendRequest{Phone: "+14155550100", IdempotencyKey: "signup-42"}); err != nil || res.IdempotencyKey != "signup-42" ||
		f.tries[3].Header.Get("Idempotency-Key") != "signup-42" {
		t.Fatalf("own key: %+v %v", res, err)
	}
	// Two calls, two keys.
	if f.tries[0].Header.Get("Idempotency-Key") == f.tries[3].Header.Get("Idempotency-Key") {
		t.Fatal("two calls shared a key")
	}
}

func TestSendGivesUp(t *testing.T) {
	unavailable := `{"error":{"code":"unavailable","message":"Redis is unreachable"}}`
	t.Run("after its tries", func(t *testing.T) {
		f := newFake(t, reply(503, unavailable))
		c, waits := testClient(t, f.URL)
		_, err := c.Send(context.Background(), SendRequest{Phone: "+14155550100"})
		var u *Unavailable
		if !errors.As(err, &u) || u.APIError == nil || u.StatusCode != 503 || u.Message != "Redis is unreachable" {
			t.Fatalf("err %v, want *Unavailable with the answer", err)
		}
		if f.count() != 3 || len(*waits) != 2 {
			t.Fatalf("%d tries, %d waits; want 3 and 2", f.count(), len(*waits))
		}
		// Backoff doubles: the second wait's ceiling is twice the first's.
		if (*waits)[0] < 50*time.Millisecond || (*waits)[0] > 100*time.Millisecond || (*waits)[1] < 100*time.Millisecond || (*waits)[1] > 200*time.Millisecond {
			t.Fatalf("waits %v", *waits)
		}
	})
	t.Run("Retry-After longer than the client waits", func(t *testing.T) {
		f := newFake(t, reply(503, unavailable, "Retry-After", "3600"))
		c, _ := testClient(t, f.URL)
		if _, err := c.Send(context.Background(), SendRequest{Phone: "+14155550100"}); f.count() != 1 {
			t.Fatalf("%d tries (%v), want 1", f.count(), err)
		}
	})
	t.Run("the wait would outlast the context", func(t *testing.T) {
		f := newFake(t, reply(503, unavailable, "Retry-After", "4"))
		c, waits := testClient(t, f.URL)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := c.Send(ctx, SendRequest{Phone: "+14155550100"})
		var u *Unavailable
		if !errors.As(err, &u) || f.count() != 1 || len(*waits) != 0 {
			t.Fatalf("%d tries, waits %v, err %v", f.count(), *waits, err)
		}
	})
	t.Run("no smsgw at all", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close() // nothing listens there now
		c, waits := testClient(t, "http://"+addr)
		_, err = c.Send(context.Background(), SendRequest{Phone: "+14155550100"})
		var u *Unavailable
		if !errors.As(err, &u) || u.APIError != nil || u.Err == nil || len(*waits) != 2 {
			t.Fatalf("err %#v, waits %v", err, *waits)
		}
		var op *net.OpError
		if !errors.As(err, &op) {
			t.Fatalf("the cause is not reachable with errors.As: %v", err)
		}
	})
}

// TestErrorsAreTyped: each refusal of the contract is its type, carries
// its fields, unwraps to *APIError, and is never tried again.
func TestErrorsAreTyped(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		header []string
		check  func(t *testing.T, err error)
	}{
		{"rate limited", 429, `{"error":{"code":"rate_limited","message":"too many","scope":"key","key":"user_id","window":"1h","limit":3,"retry_after":42}}`,
			[]string{"Retry-After", "42"}, func(t *testing.T, err error) {
				var e *RateLimited
				if !errors.As(err, &e) || e.RetryAfter != 42*time.Second || e.Scope != "key" || e.Key != "user_id" || e.Window != "1h" || e.Limit != 3 {
					t.Fatalf("%#v", err)
				}
			}},
		{"rate limited by a rule, Retry-After only in the header", 429, `{"error":{"code":"rate_limited","message":"held","scope":"range","rule":"range_1k"}}`,
			[]string{"Retry-After", "7"}, func(t *testing.T, err error) {
				var e *RateLimited
				if !errors.As(err, &e) || e.RetryAfter != 7*time.Second || e.Rule != "range_1k" {
					t.Fatalf("%#v", err)
				}
			}},
		{"rate limited, no Retry-After anywhere", 429, `{"error":{"code":"rate_limited","message":"x","retry_after":"soon"}}`, nil,
			func(t *testing.T, err error) {
				var e *RateLimited
				if !errors.As(err, &e) || e.RetryAfter != 0 {
					t.Fatalf("%#v", err)
				}
			}},
		{"phone not allowed", 422, `{"error":{"code":"phone_not_allowed","message":"no","reason":"type:premium_rate"}}`, nil,
			func(t *testing.T, err error) {
				var e *PhoneNotAllowed
				if !errors.As(err, &e) || e.Reason != "type:premium_rate" {
					t.Fatalf("%#v", err)
				}
			}},
		{"challenge required", 403, `{"error":{"code":"challenge_required","message":"solve","challenge":{"provider":"turnstile","site_key":"0x4A"},"scope":"range","rule":"range_100"}}`, nil,
			func(t *testing.T, err error) {
				var e *ChallengeRequired
				if !errors.As(err, &e) || e.Provider != "turnstile" || e.SiteKey != "0x4A" || e.Rule != "range_100" {
					t.Fatalf("%#v", err)
				}
			}},
		{"invalid request", 400, `{"error":{"code":"invalid_request","message":"limit_keys: unknown key \"x\""}}`, []string{"X-Request-ID", "r-9"},
			func(t *testing.T, err error) {
				var e *APIError
				if !errors.As(err, &e) || e.Code != "invalid_request" || e.StatusCode != 400 || e.RequestID != "r-9" || !strings.Contains(e.Error(), `unknown key`) {
					t.Fatalf("%#v", err)
				}
			}},
		{"provider error (never retried: a timeout may have texted)", 502, `{"error":{"code":"provider_error","message":"provider"}}`, nil,
			func(t *testing.T, err error) {
				var e *APIError
				if !errors.As(err, &e) || e.Code != "provider_error" {
					t.Fatalf("%#v", err)
				}
			}},
		{"a proxy's page", 502, "<html>\x1b[31mBad Gateway</html>", []string{"Content-Type", "text/html"},
			func(t *testing.T, err error) {
				var e *APIError
				if !errors.As(err, &e) || e.Code != "" || e.StatusCode != 502 || strings.ContainsRune(e.Error(), 0x1b) {
					t.Fatalf("%#v", err)
				}
			}},
		{"internal error", 500, `{"error":{"code":"internal","message":"bug"}}`, nil,
			func(t *testing.T, err error) {
				var e *APIError
				if !errors.As(err, &e) || e.Code != "internal" {
					t.Fatalf("%#v", err)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, reply(tc.status, tc.body, tc.header...))
			c, _ := testClient(t, f.URL)
			_, err := c.Send(context.Background(), SendRequest{Phone: "+14155550100"})
			tc.check(t, err)
			var api *APIError
			if !errors.As(err, &api) || api.StatusCode != tc.status {
				t.Fatalf("%v does not unwrap to *APIError %d", err, tc.status)
			}
			if f.count() != 1 {
				t.Fatalf("%d tries: a %d is never tried again", f.count(), tc.status)
			}
		})
	}
}

func TestVerifyAnswers(t *testing.T) {
	f := newFake(t,
		reply(200, `{"status":"approved","phone":"+14155550100"}`),
		reply(422, `{"error":{"code":"invalid_code","message":"wrong","attempts_left":2}}`),
		reply(422, `{"error":{"code":"invalid_code","message":"wrong"}}`),
		reply(404, `{"error":{"code":"no_pending_code","message":"none"}}`))
	c, _ := testClient(t, f.URL)
	ctx := context.Background()
	req := VerifyRequest{Phone: "+14155550100", Code: "123456", ClientIP: "2001:db8::7"}
	if res, err := c.Verify(ctx, req); err != nil || res != (VerifyResult{Status: "approved", Phone: "+14155550100"}) {
		t.Fatalf("%+v %v", res, err)
	}
	if !strings.Contains(f.body[0], `"client_ip":"2001:db8::7"`) || f.tries[0].Header.Get("Idempotency-Key") != "" {
		t.Fatalf("verify request %v %s", f.tries[0].Header, f.body[0])
	}
	var ic *InvalidCode
	if _, err := c.Verify(ctx, req); !errors.As(err, &ic) || ic.AttemptsLeft != 2 {
		t.Fatalf("%#v", err)
	}
	if _, err := c.Verify(ctx, req); !errors.As(err, &ic) || ic.AttemptsLeft != -1 {
		t.Fatalf("attempts_left missing: %#v", err)
	}
	var np *NoPendingCode
	if _, err := c.Verify(ctx, req); !errors.As(err, &np) {
		t.Fatalf("%#v", err)
	}
}

// TestVerifyRetriesOnlyWhatNeverLeft: a verify that reached smsgw (a 503,
// a hang-up) is not tried again; one whose connection failed is.
func TestVerifyRetriesOnlyWhatNeverLeft(t *testing.T) {
	for name, step := range map[string]http.HandlerFunc{
		"503":     reply(503, `{"error":{"code":"unavailable","message":"Redis"}}`, "Retry-After", "1"),
		"hang-up": hangUp,
	} {
		t.Run(name, func(t *testing.T) {
			f := newFake(t, step, reply(200, `{"status":"approved","phone":"+14155550100"}`))
			c, _ := testClient(t, f.URL)
			_, err := c.Verify(context.Background(), VerifyRequest{Phone: "+14155550100", Code: "1"})
			var u *Unavailable
			if !errors.As(err, &u) || f.count() != 1 {
				t.Fatalf("%d tries, err %v: want 1 and *Unavailable", f.count(), err)
			}
		})
	}
	t.Run("dial failed", func(t *testing.T) {
		f := newFake(t, reply(200, `{"status":"approved","phone":"+14155550100"}`))
		var dials atomic.Int32
		tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if dials.Add(1) == 1 {
				return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("connection refused")}
			}
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}
		defer tr.CloseIdleConnections()
		c, _ := testClient(t, f.URL, WithHTTPClient(&http.Client{Transport: tr}))
		if _, err := c.Verify(context.Background(), VerifyRequest{Phone: "+14155550100", Code: "1"}); err != nil || f.count() != 1 || dials.Load() != 2 {
			t.Fatalf("err %v, %d tries, %d dials", err, f.count(), dials.Load())
		}
	})
}

// TestHostileAnswers: a 2xx that is not the contract's is a
// *ProtocolError, never a zero result; a huge body is not read whole.
func TestHostileAnswers(t *testing.T) {
	huge := strings.Repeat("x", 3<<20)
	for name, step := range map[string]http.HandlerFunc{
		"not JSON":       reply(202, `<html>`),
		"truncated JSON": reply(202, accepted[:30]),
		"empty object":   reply(202, `{}`),
		"wrong types":    reply(202, `{"phone":1,"verification_id":[]}`),
		"huge":           reply(202, `{"phone":"`+huge+`"}`),
	} {
		t.Run(name, func(t *testing.T) {
			f := newFake(t, step)
			c, _ := testClient(t, f.URL)
			_, err := c.Send(context.Background(), SendRequest{Phone: "+14155550100"})
			var pe *ProtocolError
			if !errors.As(err, &pe) || f.count() != 1 {
				t.Fatalf("%d tries, err %v: want 1 and *ProtocolError", f.count(), err)
			}
			if len(err.Error()) > 1000 {
				t.Fatalf("the error carries the body: %d bytes", len(err.Error()))
			}
		})
	}
	t.Run("huge 503 is still a 503", func(t *testing.T) {
		f := newFake(t, reply(503, huge), reply(202, accepted))
		c, _ := testClient(t, f.URL)
		if _, err := c.Send(context.Background(), SendRequest{Phone: "+14155550100"}); err != nil || f.count() != 2 {
			t.Fatalf("%d tries, err %v", f.count(), err)
		}
	})
	t.Run("verify answered 200 but not approved", func(t *testing.T) {
		f := newFake(t, reply(200, `{"status":"pending","phone":"+14155550100"}`))
		c, _ := testClient(t, f.URL)
		var pe *ProtocolError
		if _, err := c.Verify(context.Background(), VerifyRequest{Phone: "+14155550100", Code: "1"}); !errors.As(err, &pe) {
			t.Fatalf("%v", err)
		}
	})
}

const verification = `{"verification_id":"ver_1","phone":"+14155550100","status":"%s","sends":2,"attempts_left":4,
"delivery_status":%s,"created_at":"2026-11-26T23:00:00Z","updated_at":"2026-11-26T23:01:00Z","expires_at":"2026-11-26T23:10:00Z"}`

func verificationBody(status, delivery string) string {
	return strings.Replace(strings.Replace(verification, "%s", status, 1), "%s", delivery, 1)
}

func TestGetAndCancel(t *testing.T) {
	f := newFake(t,
		reply(200, verificationBody("pending", `"delivered"`)),
		reply(503, `{"error":{"code":"unavailable","message":"x"}}`),
		reply(200, verificationBody("canceled", `null`)),
		reply(404, `{"error":{"code":"not_found","message":"no such verification"}}`),
		reply(409, `{"error":{"code":"not_pending","message":"approved","status":"approved"}}`),
		reply(409, `{"error":{"code":"not_pending","message":"canceled","status":"canceled"}}`),
		reply(200, verificationBody("canceled", `"sent"`)))
	c, _ := testClient(t, f.URL)
	ctx := context.Background()
	v, err := c.GetVerification(ctx, "ver_1")
	if err != nil || v.Status != "pending" || v.DeliveryStatus != "delivered" || v.Sends != 2 || v.AttemptsLeft != 4 ||
		!v.ExpiresAt.Equal(time.Date(2026, 11, 26, 23, 10, 0, 0, time.UTC)) {
		t.Fatalf("%+v %v", v, err)
	}
	if f.tries[0].Method != "GET" || f.tries[0].URL.Path != "/v1/otp/verifications/ver_1" {
		t.Fatalf("%s %s", f.tries[0].Method, f.tries[0].URL)
	}
	// A 503 is tried again; a null delivery status is "".
	if v, err := c.Cancel(ctx, "ver_1"); err != nil || v.Status != "canceled" || v.DeliveryStatus != "" || f.count() != 3 ||
		f.tries[2].Method != "POST" || f.tries[2].URL.Path != "/v1/otp/verifications/ver_1/cancel" {
		t.Fatalf("%+v %v after %d tries", v, err, f.count())
	}
	var nf *NotFound
	if _, err := c.GetVerification(ctx, "ver_1"); !errors.As(err, &nf) {
		t.Fatalf("%#v", err)
	}
	var np *NotPending
	if _, err := c.Cancel(ctx, "ver_1"); !errors.As(err, &np) || np.Status != "approved" {
		t.Fatalf("%#v", err)
	}
	// Canceled already: the verification, looked up.
	if v, err := c.Cancel(ctx, "ver_1"); err != nil || v.Status != "canceled" || f.tries[6].Method != "GET" {
		t.Fatalf("%+v %v", v, err)
	}
	// An id is one path segment, whatever it holds.
	c.GetVerification(ctx, "../admin/limits?x=1")
	if p := f.tries[len(f.tries)-1].URL.EscapedPath(); p != "/v1/otp/verifications/..%2Fadmin%2Flimits%3Fx=1" {
		t.Fatalf("path %s", p)
	}
}

func TestNewChecksTheURL(t *testing.T) {
	for _, u := range []string{"", "smsgw:8080", "ftp://x", "http://"} {
		if _, err := New(u); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
	c, err := New("http://smsgw.internal:8080/")
	if err != nil || c.base != "http://smsgw.internal:8080" {
		t.Fatalf("%v %v", c, err)
	}
}

// TestRetryAfterReadOnce: a 429's RetryAfter and the wait before a 503 is
// tried again, each through a call, come from one reading of the answer
// (retryAfterOf), so they agree on every edge: the body's retry_after
// first, in (0, maxRetryAfter] and with its fraction, else the Retry-After
// header.
func TestRetryAfterReadOnce(t *testing.T) {
	// An HTTP date is made when its case runs (dateHeader), not before
	// the other cases: it names whole seconds, so it reads up to a second
	// short at once, and more with every case run before it.
	const dateHeader = "an HTTP date 90 s from now"
	for _, tc := range []struct {
		name, field, header string
		want                time.Duration
	}{
		{"body and header", `,"retry_after":42`, "42", 42 * time.Second},
		{"a fraction in the body", `,"retry_after":0.25`, "", 250 * time.Millisecond},
		{"the header alone", ``, "7", 7 * time.Second},
		{"the body at the bound", `,"retry_after":2147483648`, "5", maxRetryAfter * time.Second},
		{"the body past the bound", `,"retry_after":2147483649`, "5", 5 * time.Second},
		{"a negative body", `,"retry_after":-3`, "5", 5 * time.Second},
		{"a zero body", `,"retry_after":0`, "", 0},
		{"a header past the bound", ``, "2147483649", 0},
		{"an HTTP date", ``, dateHeader, 90 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isDate := tc.header == dateHeader
			if isDate {
				tc.header = time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
			}
			var headers []string
			if tc.header != "" {
				headers = []string{"Retry-After", tc.header}
			}
			limited := newFake(t, reply(429, `{"error":{"code":"rate_limited","message":"full"`+tc.field+`}}`, headers...))
			c, _ := testClient(t, limited.URL)
			var rl *RateLimited
			if _, err := c.Send(context.Background(), SendRequest{Phone: "+14155550100"}); !errors.As(err, &rl) {
				t.Fatalf("429: %T %v", err, err)
			}
			down := newFake(t, reply(503, `{"error":{"code":"unavailable","message":"down"`+tc.field+`}}`, headers...), reply(202, accepted))
			// A backoff of a nanosecond at most: the wait is what smsgw asked.
			c, waits := testClient(t, down.URL, WithRetries(2, time.Nanosecond, 1<<62))
			if _, err := c.Send(context.Background(), SendRequest{Phone: "+14155550100"}); err != nil || len(*waits) != 1 {
				t.Fatalf("503 then 202: %v, waits %v", err, *waits)
			}
			got429, got503 := rl.RetryAfter, (*waits)[0]
			if got503 <= time.Nanosecond {
				got503 = 0
			}
			if isDate {
				// Read the same way, the two waits differ only by the
				// time between the two requests.
				if d := (*waits)[0] - rl.RetryAfter; d > 500*time.Millisecond || d < -500*time.Millisecond {
					t.Fatalf("429 RetryAfter %v and 503 wait %v of one date: read two ways", rl.RetryAfter, (*waits)[0])
				}
				// Whole seconds, read on each reading's clock: up to a
				// second short, and the time two requests take (a loaded
				// machine's second at most) on top.
				if got429 > tc.want-2*time.Second && got429 <= tc.want {
					got429 = tc.want
				}
				if got503 > tc.want-2*time.Second && got503 <= tc.want {
					got503 = tc.want
				}
			}
			if got429 != tc.want || got503 != tc.want {
				t.Fatalf("429 RetryAfter %v, 503 wait %v, want both %v", rl.RetryAfter, (*waits)[0], tc.want)
			}
		})
	}
}
