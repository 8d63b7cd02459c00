package twilio

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"smsgw/audit"
	"smsgw/internal/testenv"
	"smsgw/otp"
	"smsgw/sender/twilio/twiliotest"
)

// The receipts endpoint, on a real Postgres: only signed receipts move the
// row's delivery status. (The e2e tests drive it over HTTP in the binary.)
func TestReceipts(t *testing.T) {
	const public = "https://sms.example.com/v1/webhooks/twilio/status"
	pool := testenv.Pool(t)
	reader := audit.NewReader(pool)
	p, err := New(Config{AccountSID: testSID, AuthToken: testToken, MessagingServiceSID: testMG, StatusCallbackURL: public})
	if err != nil {
		t.Fatal(err)
	}
	ep, ok := p.Receipts(audit.NewDeliveries(pool), slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if !ok || ep.Method != http.MethodPost || ep.Path != ReceiptsPath {
		t.Fatalf("endpoint %+v %v", ep, ok)
	}

	// A sent text's row, as if Twilio had taken it.
	const sid = "SM0123456789abcdef0123456789abcdef"
	ev := otp.AuditEvent{ID: "01a20160-0000-7000-8000-000000000001", Time: time.Now().UTC(), Kind: "send", Outcome: "sent",
		RequestID: "r1", Phone: "+14155552671", Provider: "twilio", MessageID: sid}
	if err := audit.Write(context.Background(), pool, []otp.AuditEvent{ev}); err != nil {
		t.Fatal(err)
	}
	// callback answers with the status the API gives a nil error (the
	// recorder's) or the code of the error.
	callback := func(form url.Values, sig string, contentType string) (int, string) {
		r := httptest.NewRequest(http.MethodPost, ReceiptsPath, strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", contentType)
		if sig != "" {
			r.Header.Set("X-Twilio-Signature", sig)
		}
		w := httptest.NewRecorder()
		if err := ep.Handle(w, r); err != nil {
			return 0, otp.ErrorCode(err)
		}
		return w.Code, ""
	}
	form := url.Values{"MessageSid": {sid}, "MessageStatus": {"delivered"}, "AccountSid": {testSID}, "To": {"+14155552671"}}
	tampered := url.Values{"MessageSid": {sid}, "MessageStatus": {"failed"}, "AccountSid": {testSID}, "To": {"+14155552671"}}
	good := twiliotest.SignForm(testToken, public, form)
	const formType = "application/x-www-form-urlencoded"

	for _, tt := range []struct {
		name string
		form url.Values
		sig  string
		ct   string
		code string
	}{
		{"unsigned", form, "", formType, otp.EForbidden},
		{"wrong token", form, twiliotest.SignForm("other-token", public, form), formType, otp.EForbidden},
		{"signed for another URL", form, twiliotest.SignForm(testToken, "https://evil.example.com/x", form), formType, otp.EForbidden},
		{"a changed parameter", tampered, good, formType, otp.EForbidden},
		{"JSON", form, good, "application/json", otp.EUnsupportedMediaType},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, code := callback(tt.form, tt.sig, tt.ct); code != tt.code {
				t.Fatalf("%q, want %s", code, tt.code)
			}
			rows, _ := reader.Recent(context.Background(), "+14155552671", 1)
			if rows[0].DeliveryStatus != "" {
				t.Fatalf("a refused callback changed the row: %+v", rows[0])
			}
		})
	}
	if status, code := callback(form, good, formType); status != 204 {
		t.Fatalf("signed callback: %d %s", status, code)
	}
	failed := url.Values{"MessageSid": {sid}, "MessageStatus": {"undelivered"}, "ErrorCode": {"30003"}}
	if status, code := callback(failed, twiliotest.SignForm(testToken, public, failed), formType); status != 204 {
		t.Fatalf("second callback: %d %s", status, code)
	}
	rows, err := reader.Recent(context.Background(), "+14155552671", 1)
	if err != nil || rows[0].DeliveryStatus != "undelivered" || rows[0].DeliveryErrorCode != "30003" {
		t.Fatalf("row after callbacks: %+v %v", rows, err)
	}
	bad := url.Values{"MessageSid": {"nope"}, "MessageStatus": {"delivered"}}
	if _, code := callback(bad, twiliotest.SignForm(testToken, public, bad), formType); code != otp.EInvalidRequest {
		t.Fatalf("signed nonsense: %s", code)
	}

	// Without a status callback URL Twilio sends no receipts: no endpoint.
	plain, err := New(Config{AccountSID: testSID, AuthToken: testToken, MessagingServiceSID: testMG})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := plain.Receipts(audit.NewDeliveries(pool), slog.Default(), prometheus.NewRegistry()); ok {
		t.Fatal("an endpoint without a status callback URL")
	}
}
