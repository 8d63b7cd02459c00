package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"smsgw/internal/testenv"
	"smsgw/sender/twilio/twiliotest"
)

const (
	twilioSID   = "AC0123456789abcdef0123456789abcdef"
	twilioToken = "0123456789abcdef0123456789abcdef"
)

// fakeTwilio is Twilio's Messages API as far as smsgw uses it.
type fakeTwilio struct {
	*httptest.Server
	mu    sync.Mutex
	texts []url.Values
	seq   atomic.Int64
}

func newFakeTwilio(t *testing.T) *fakeTwilio {
	t.Helper()
	f := &fakeTwilio{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if !ok || user != twilioSID || pass != twilioToken || r.URL.Path != "/2010-04-01/Accounts/"+twilioSID+"/Messages.json" {
			w.WriteHeader(401)
			fmt.Fprint(w, `{"code": 20003, "message": "Authenticate", "more_info": "https://www.twilio.com/docs/errors/20003", "status": 401}`)
			return
		}
		r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		to := r.PostForm.Get("To")
		switch {
		case strings.HasPrefix(to, "+1201"):
			w.WriteHeader(400)
			fmt.Fprintf(w, `{"code": 21211, "message": "The 'To' number %s is not a valid phone number.", "more_info": "https://www.twilio.com/docs/errors/21211", "status": 400}`, to)
			return
		case strings.HasPrefix(to, "+1650"): // slow: past smsgw's timeout, after taking the text
			f.record(r.PostForm)
			time.Sleep(3 * time.Second)
		}
		sid := fmt.Sprintf("SM%032x", f.seq.Add(1))
		f.record(r.PostForm)
		w.WriteHeader(201)
		json.NewEncoder(w).Encode(map[string]any{"sid": sid, "status": "queued", "to": to, "body": r.PostForm.Get("Body")})
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeTwilio) record(v url.Values) {
	f.mu.Lock()
	f.texts = append(f.texts, v)
	f.mu.Unlock()
}

func (f *fakeTwilio) sent() []url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]url.Values(nil), f.texts...)
}

// TestTwilioEndToEnd runs smsgw on the real Twilio client against a fake
// Twilio: texts go out in Twilio's wire format, refusals give quota back,
// a timeout keeps it, and signed delivery receipts land on the audit row.
func TestTwilioEndToEnd(t *testing.T) {
	t.Parallel()
	tw := newFakeTwilio(t)
	e := newEnv(t)
	const public = "https://sms.example.com/v1/webhooks/twilio/status"
	p := startWith(t, e, fmt.Sprintf(`
[sender]
provider = "twilio"
timeout = "1s"

[sender.twilio]
from = "+15005550006"
api_base = %q
status_callback_url = %q
`, tw.URL, public), []string{"TWILIO_ACCOUNT_SID=" + twilioSID, "TWILIO_AUTH_TOKEN=" + twilioToken})

	r := post(t, p.URL+"/v1/otp/send", `{"phone": "+14155552671"}`, nil)
	if r.Status != 202 {
		t.Fatalf("send: %d %s", r.Status, r.Raw)
	}
	texts := tw.sent()
	if len(texts) != 1 || texts[0].Get("To") != "+14155552671" || texts[0].Get("From") != "+15005550006" ||
		texts[0].Get("StatusCallback") != public || !strings.Contains(texts[0].Get("Body"), "verification code") {
		t.Fatalf("Twilio got %v", texts)
	}
	if r := get(t, p.URL+"/v1/fake/messages"); r.Status != 404 {
		t.Fatalf("fake outbox without the fake provider: %d", r.Status)
	}

	// Twilio refuses the number: 502, quota back (a second try is not 429).
	for i := 0; i < 2; i++ {
		r := post(t, p.URL+"/v1/otp/send", `{"phone": "+12015550123"}`, nil)
		if r.Status != 502 || r.ErrorCode() != "provider_error" {
			t.Fatalf("refused %d: %d %s", i, r.Status, r.Raw)
		}
	}
	// Twilio takes the text but answers too late: unknown outcome, the quota stays used.
	if r := post(t, p.URL+"/v1/otp/send", `{"phone": "+16502530000"}`, nil); r.Status != 502 {
		t.Fatalf("slow: %d %s", r.Status, r.Raw)
	}
	if r := post(t, p.URL+"/v1/otp/send", `{"phone": "+16502530000"}`, nil); r.Status != 429 {
		t.Fatalf("after an unknown outcome the quota must stay used: %d %s", r.Status, r.Raw)
	}

	// Delivery receipts, signed over the public URL.
	sid := fmt.Sprintf("SM%032x", 1)
	receipt := url.Values{"MessageSid": {sid}, "MessageStatus": {"delivered"}, "AccountSid": {twilioSID}}
	postForm := func(form url.Values, sig string) int {
		req, _ := http.NewRequest(http.MethodPost, p.URL+"/v1/webhooks/twilio/status", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Twilio-Signature", sig)
		return roundTrip(t, req).Status
	}
	if st := postForm(receipt, twiliotest.SignForm("wrong-token", public, receipt)); st != 403 {
		t.Fatalf("forged receipt: %d", st)
	}
	// The row may still be on its way to Postgres: the receipt must not be lost.
	if st := postForm(receipt, twiliotest.SignForm(twilioToken, public, receipt)); st != 204 {
		t.Fatalf("signed receipt: %d", st)
	}
	testenv.WaitUntil(t, 30*time.Second, "the receipt's delivery status", func() error {
		if status := deliveryStatus(t, e, sid); status != "delivered" {
			return fmt.Errorf("delivery_status %q, want delivered", status)
		}
		return nil
	})
	p.stop(t)
	rows := auditRows(t, e)
	reasons := []string{}
	for _, r := range rows {
		reasons = append(reasons, r.Outcome+"/"+deref(r.Reason)+"/"+deref(r.Provider))
	}
	want := "sent/<null>/twilio provider_error/invalid_number/twilio provider_error/invalid_number/twilio provider_error/timeout/twilio rate_limited/phone:1m/<null>"
	if strings.Join(reasons, " ") != want {
		t.Fatalf("audit rows\n%s\nwant\n%s", strings.Join(reasons, " "), want)
	}
}

func deliveryStatus(t *testing.T, e env, sid string) string {
	t.Helper()
	ctx := context.Background()
	conn := e.db(t)
	defer conn.Close(ctx)
	var status *string
	err := conn.QueryRow(ctx, `SELECT delivery_status FROM audit_log WHERE provider_message_id = $1`, sid).Scan(&status)
	if err == pgx.ErrNoRows {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return deref(status)
}

// TestFailoverAndIdempotencyAcrossProcesses: the in-house gateway fails with
// 503s, so texts fail over to the next provider; GB is routed to the gateway
// alone; and duplicate sends racing through two processes with one
// Idempotency-Key text once.
func TestFailoverAndIdempotencyAcrossProcesses(t *testing.T) {
	t.Parallel()
	var gatewayCalls atomic.Int64
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gatewayCalls.Add(1)
		if r.Header.Get("X-Smsgw-Signature") == "" {
			w.WriteHeader(401)
			return
		}
		w.WriteHeader(503)
	}))
	t.Cleanup(gw.Close)
	e := newEnv(t)
	cfg := fmt.Sprintf(`
[server]
trusted_proxies = ["127.0.0.0/8"]

[pumping]
mode = "off"

[sender]
providers = ["http", "fake"]

[sender.routes]
GB = ["http"]

[sender.http]
url = %q

[sender.breaker]
failures = 3
open_for = "1m"
`, gw.URL)
	extra := []string{"SMSGW_HTTP_SECRET=" + strings.Repeat("s", 40)}
	a := startWith(t, e, cfg, extra)
	b := startWith(t, e, cfg, extra)

	for i := 0; i < 5; i++ {
		r := post(t, a.URL+"/v1/otp/send", fmt.Sprintf(`{"phone": "+1650253%04d"}`, i), map[string]string{"X-Forwarded-For": fmt.Sprintf("198.51.100.%d", i)})
		if r.Status != 202 {
			t.Fatalf("send %d: %d %s", i, r.Status, r.Raw)
		}
	}
	// Three 503s opened the gateway's breaker: the last two never called it.
	if n := gatewayCalls.Load(); n != 3 {
		t.Fatalf("gateway called %d times, want 3", n)
	}
	if r := post(t, a.URL+"/v1/otp/send", `{"phone": "+447400123456"}`, nil); r.Status != 502 || r.ErrorCode() != "provider_error" {
		t.Fatalf("GB routed to the gateway alone: %d %s", r.Status, r.Raw)
	}

	distinct := testenv.Race(t, 20, func(i int) string {
		url := a.URL
		if i%2 == 1 {
			url = b.URL
		}
		r := post(t, url+"/v1/otp/send", `{"phone": "+14155552671"}`, map[string]string{"Idempotency-Key": "signup-42", "X-Forwarded-For": "203.0.113.99"})
		return fmt.Sprintf("%d %s", r.Status, r.Body["id"])
	})
	if len(distinct) != 1 {
		t.Fatalf("answers %v: want one 202 answer for all", distinct)
	}
	texts := 0
	for _, p := range []*process{a, b} {
		texts += len(outboxBodies(t, p, "+14155552671"))
	}
	if texts != 1 {
		t.Fatalf("%d texts for one Idempotency-Key", texts)
	}
}
