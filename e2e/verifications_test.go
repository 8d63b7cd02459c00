package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"smsgw/internal/testenv"
	"smsgw/sender/twilio/twiliotest"
)

// Two API keys of the verification tests: each sees only its own.
const (
	keyA = "e2e-verifications-key-a-0123456789"
	keyB = "e2e-verifications-key-b-0123456789"
)

// verificationConfig runs smsgw on Twilio (fake), whose signed receipts
// reach public, with roomy windows, pumping off and two keys.
func verificationConfig(twilioURL, public, ttl string) string {
	digest := func(k string) string { s := sha256.Sum256([]byte(k)); return hex.EncodeToString(s[:]) }
	return fmt.Sprintf(`
[sender]
provider = "twilio"
timeout = "5s"

[sender.twilio]
from = "+15005550006"
api_base = %q
status_callback_url = %q

[otp]
ttl = %q
max_attempts = 2

[pumping]
mode = "off"

[[limits.ip]]
window = "1m"
max = 1000

[[limits.phone]]
window = "1m"
max = 100

[[limits.verify_ip]]
window = "1m"
max = 1000

[[api.keys]]
name = "key-a"
sha256 = %q
enabled = true

[[api.keys]]
name = "key-b"
sha256 = %q
enabled = true
`, twilioURL, public, ttl, digest(keyA), digest(keyB))
}

func bearer(key string) map[string]string { return map[string]string{"Authorization": "Bearer " + key} }

// callAs is method on path with key as the bearer token ("" none).
func callAs(t *testing.T, p *process, method, path, key string) response {
	t.Helper()
	req, _ := http.NewRequest(method, p.URL+path, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return roundTrip(t, req)
}

// lastTwilioCode is the code of the last text the fake Twilio took for phone.
func lastTwilioCode(t *testing.T, tw *fakeTwilio, phone string) string {
	t.Helper()
	texts := tw.sent()
	for i := len(texts) - 1; i >= 0; i-- {
		if texts[i].Get("To") == phone {
			return codeIn(texts[i].Get("Body"))
		}
	}
	t.Fatalf("no text to %s", phone)
	return ""
}

// TestVerificationLifecycle: a verification's status follows it through
// sent, resent, delivered (a signed receipt), approved, canceled, failed and
// expired (with nobody asking); each key sees only its own, the admin token
// all; a cancel of an approved one is 409. Every event those caused reaches
// a receiver that checks signatures with the Standard Webhooks library,
// once each.
func TestVerificationLifecycle(t *testing.T) {
	t.Parallel()
	tw := newFakeTwilio(t)
	rc := newReceiver(t)
	e := newEnv(t)
	const public = "https://sms.example.com/v1/webhooks/twilio/status"
	hooks, hookEnv := rc.webhookConfig()
	p := startWith(t, e, verificationConfig(tw.URL, public, "15s")+hooks,
		append([]string{"TWILIO_ACCOUNT_SID=" + twilioSID, "TWILIO_AUTH_TOKEN=" + twilioToken}, hookEnv...))

	send := func(phone, key string) string {
		t.Helper()
		r := post(t, p.URL+"/v1/otp/send", `{"phone": "`+phone+`"}`, bearer(key))
		if r.Status != 202 {
			t.Fatalf("send %s: %d %s", phone, r.Status, r.Raw)
		}
		id, _ := r.Body["verification_id"].(string)
		if len(id) != 36 {
			t.Fatalf("send %s: verification_id %q", phone, id)
		}
		return id
	}
	verify := func(phone, code string) response {
		t.Helper()
		return post(t, p.URL+"/v1/otp/verify", `{"phone": "`+phone+`", "code": "`+code+`"}`, bearer(keyA))
	}
	status := func(id, key string) map[string]any {
		t.Helper()
		r := callAs(t, p, http.MethodGet, "/v1/otp/verifications/"+id, key)
		if r.Status != 200 {
			t.Fatalf("get %s: %d %s", id, r.Status, r.Raw)
		}
		return r.Body
	}
	want := func(id, key string, fields map[string]any) {
		t.Helper()
		got := status(id, key)
		for k, v := range fields {
			if got[k] != v {
				t.Fatalf("verification %s: %s = %v, want %v (%v)", id, k, got[k], v, got)
			}
		}
	}

	// Sent first, so that it expires while the others go on.
	const pExpire, pApprove, pCancel, pFail = "+14155550101", "+14155550102", "+14155550103", "+14155550104"
	vExpire := send(pExpire, keyA)

	// Sent, then resent: the same verification, two texts.
	vApprove := send(pApprove, keyA)
	want(vApprove, keyA, map[string]any{"status": "pending", "sends": 1.0, "attempts_left": 2.0, "delivery_status": nil, "phone": pApprove})
	if again := send(pApprove, keyA); again != vApprove {
		t.Fatalf("a resend answered verification %s, the first %s", again, vApprove)
	}
	want(vApprove, keyA, map[string]any{"status": "pending", "sends": 2.0})
	// Another key's is not found, like an unknown one; no key is 401; the
	// admin token sees it.
	if r := callAs(t, p, http.MethodGet, "/v1/otp/verifications/"+vApprove, keyB); r.Status != 404 || r.ErrorCode() != "not_found" {
		t.Fatalf("another key's: %d %s", r.Status, r.Raw)
	}
	if r := callAs(t, p, http.MethodGet, "/v1/otp/verifications/0199aaaa-0000-7000-8000-000000000000", keyA); r.Status != 404 || r.ErrorCode() != "not_found" {
		t.Fatalf("unknown: %d %s", r.Status, r.Raw)
	}
	if r := callAs(t, p, http.MethodGet, "/v1/otp/verifications/"+vApprove, ""); r.Status != 401 {
		t.Fatalf("no key: %d %s", r.Status, r.Raw)
	}
	want(vApprove, adminToken, map[string]any{"status": "pending"})

	// The resend's signed receipt: delivered.
	sid := fmt.Sprintf("SM%032x", tw.seq.Load())
	receipt := url.Values{"MessageSid": {sid}, "MessageStatus": {"delivered"}, "AccountSid": {twilioSID}}
	req, _ := http.NewRequest(http.MethodPost, p.URL+"/v1/webhooks/twilio/status", strings.NewReader(receipt.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Twilio-Signature", twiliotest.SignForm(twilioToken, public, receipt))
	if r := roundTrip(t, req); r.Status != 204 {
		t.Fatalf("receipt: %d %s", r.Status, r.Raw)
	}
	want(vApprove, keyA, map[string]any{"delivery_status": "delivered"})

	// Approved; a cancel then is 409 with its status.
	if r := verify(pApprove, lastTwilioCode(t, tw, pApprove)); r.Status != 200 {
		t.Fatalf("verify: %d %s", r.Status, r.Raw)
	}
	want(vApprove, keyA, map[string]any{"status": "approved"})
	if r := callAs(t, p, http.MethodPost, "/v1/otp/verifications/"+vApprove+"/cancel", keyA); r.Status != 409 ||
		r.ErrorCode() != "not_pending" || r.ErrorField("status") != "approved" {
		t.Fatalf("cancel of an approved one: %d %s", r.Status, r.Raw)
	}

	// Canceled: only by its key; the code is gone.
	vCancel := send(pCancel, keyA)
	code := lastTwilioCode(t, tw, pCancel)
	if r := callAs(t, p, http.MethodPost, "/v1/otp/verifications/"+vCancel+"/cancel", keyB); r.Status != 404 {
		t.Fatalf("cancel by another key: %d %s", r.Status, r.Raw)
	}
	r := callAs(t, p, http.MethodPost, "/v1/otp/verifications/"+vCancel+"/cancel", keyA)
	if r.Status != 200 || r.Body["status"] != "canceled" || r.Body["verification_id"] != vCancel {
		t.Fatalf("cancel: %d %s", r.Status, r.Raw)
	}
	if r := verify(pCancel, code); r.Status != 404 || r.ErrorCode() != "no_pending_code" {
		t.Fatalf("verify after cancel: %d %s", r.Status, r.Raw)
	}
	want(vCancel, keyA, map[string]any{"status": "canceled"})

	// Failed: the wrong guesses used up.
	vFail := send(pFail, keyB)
	wrong := fmt.Sprintf("%06d", (atoi(lastTwilioCode(t, tw, pFail))+1)%1000000)
	if r := verify(pFail, wrong); r.Status != 422 || r.ErrorField("attempts_left") != 1.0 {
		t.Fatalf("first wrong guess: %d %s", r.Status, r.Raw)
	}
	want(vFail, keyB, map[string]any{"status": "pending", "attempts_left": 1.0})
	if r := verify(pFail, wrong); r.Status != 422 || r.ErrorField("attempts_left") != 0.0 {
		t.Fatalf("last wrong guess: %d %s", r.Status, r.Raw)
	}
	want(vFail, keyB, map[string]any{"status": "failed", "attempts_left": 0.0})

	// Expired, with nobody asking: the sweeper.
	testenv.WaitUntil(t, 60*time.Second, "the verification to expire", func() error {
		if st := status(vExpire, keyA)["status"]; st != "expired" {
			return fmt.Errorf("status %v", st)
		}
		return nil
	})

	got := rc.waitEvents(t, 60*time.Second, []string{
		"verification.sent@" + vExpire, "verification.expired@" + vExpire,
		"verification.sent@" + vApprove, "verification.sent@" + vApprove, "verification.delivered@" + vApprove,
		"verification.approved@" + vApprove,
		"verification.sent@" + vCancel, "verification.canceled@" + vCancel,
		"verification.sent@" + vFail, "verification.failed@" + vFail,
	})
	for _, ev := range got {
		var keys []string
		for k := range ev.Data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if strings.Join(keys, ",") != "api_key,country,delivery_status,phone,request_id,status,verification_id" {
			t.Fatalf("event %s data %v", ev.Type, ev.Data)
		}
		if ev.Data["country"] != "US" || ev.Type != "verification."+fmt.Sprint(ev.Data["status"]) && ev.Type != "verification.sent" &&
			ev.Type != "verification.delivered" {
			t.Fatalf("event %s: %v", ev.Type, ev.Data)
		}
		wantKey := "key-a"
		if ev.Data["verification_id"] == vFail {
			wantKey = "key-b"
		}
		if ev.Data["api_key"] != wantKey {
			t.Fatalf("event %s: api_key %v, want %s", ev.Type, ev.Data["api_key"], wantKey)
		}
	}
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}
