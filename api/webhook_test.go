package api_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"smsgw/api"
	"smsgw/audit"
	"smsgw/otp"
	"smsgw/sender/twilio/twiliotest"
)

func TestTwilioStatusCallback(t *testing.T) {
	const token, public = "twilio-auth-token-for-tests", "https://sms.example.com/v1/webhooks/twilio/status"
	pg := postgresAudit(t)
	reader, pool := pg.reader, pg.pool
	s := newTestServer(t, serverOpts{auditLog: pg.writer, auditReader: reader, deliveries: audit.NewDeliveries(pool),
		twilio: &api.TwilioWebhook{AuthToken: token, CallbackURL: public}})

	// A sent text's row, as if Twilio had taken it.
	const sid = "SM0123456789abcdef0123456789abcdef"
	ev := otp.AuditEvent{ID: "01a20160-0000-7000-8000-000000000001", Time: time.Now().UTC(), Kind: "send", Outcome: "sent",
		RequestID: "r1", Phone: "+14155552671", Provider: "twilio", MessageID: sid}
	if err := audit.Write(context.Background(), pool, []otp.AuditEvent{ev}); err != nil {
		t.Fatal(err)
	}
	callback := func(form url.Values, sig string, contentType string) response {
		h := map[string]string{}
		if sig != "" {
			h["X-Twilio-Signature"] = sig
		}
		return do(t, http.MethodPost, s.URL+"/v1/webhooks/twilio/status", contentType, strings.NewReader(form.Encode()), h)
	}
	form := url.Values{"MessageSid": {sid}, "MessageStatus": {"delivered"}, "AccountSid": {"AC0123456789abcdef0123456789abcdef"}, "To": {"+14155552671"}}
	tampered := url.Values{"MessageSid": {sid}, "MessageStatus": {"failed"}, "AccountSid": {"AC0123456789abcdef0123456789abcdef"}, "To": {"+14155552671"}}
	good := twiliotest.SignForm(token, public, form)
	const formType = "application/x-www-form-urlencoded"

	for _, tt := range []struct {
		name   string
		form   url.Values
		sig    string
		ct     string
		status int
	}{
		{"unsigned", form, "", formType, 403},
		{"wrong token", form, twiliotest.SignForm("other-token", public, form), formType, 403},
		{"signed for another URL", form, twiliotest.SignForm(token, "https://evil.example.com/x", form), formType, 403},
		{"a changed parameter", tampered, good, formType, 403},
		{"JSON", form, good, "application/json", 415},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if r := callback(tt.form, tt.sig, tt.ct); r.Status != tt.status {
				t.Fatalf("%d %s, want %d", r.Status, r.Raw, tt.status)
			}
			rows, _ := reader.Recent(context.Background(), "+14155552671", 1)
			if rows[0].DeliveryStatus != "" {
				t.Fatalf("a refused callback changed the row: %+v", rows[0])
			}
		})
	}
	if r := callback(form, good, formType); r.Status != 204 {
		t.Fatalf("signed callback: %d %s", r.Status, r.Raw)
	}
	failed := url.Values{"MessageSid": {sid}, "MessageStatus": {"undelivered"}, "ErrorCode": {"30003"}}
	if r := callback(failed, twiliotest.SignForm(token, public, failed), formType); r.Status != 204 {
		t.Fatalf("second callback: %d %s", r.Status, r.Raw)
	}
	rows, err := reader.Recent(context.Background(), "+14155552671", 1)
	if err != nil || rows[0].DeliveryStatus != "undelivered" || rows[0].DeliveryErrorCode != "30003" {
		t.Fatalf("row after callbacks: %+v %v", rows, err)
	}
	bad := url.Values{"MessageSid": {"nope"}, "MessageStatus": {"delivered"}}
	if r := callback(bad, twiliotest.SignForm(token, public, bad), formType); r.Status != 400 {
		t.Fatalf("signed nonsense: %d %s", r.Status, r.Raw)
	}

	// Without Twilio configured the route does not exist.
	plain := newTestServer(t, serverOpts{})
	if r := do(t, http.MethodPost, plain.URL+"/v1/webhooks/twilio/status", formType, strings.NewReader(form.Encode()), nil); r.Status != 404 {
		t.Fatalf("no twilio: %d", r.Status)
	}
}
