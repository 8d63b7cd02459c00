package audit_test

import (
	"context"
	"testing"

	"smsgw/audit"
	"smsgw/internal/testenv"
	"smsgw/otp"
)

func deliveryOf(t *testing.T, d *audit.Reader, id string) (status, code string) {
	t.Helper()
	rows, err := d.Recent(context.Background(), "+14155552671", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.ID == id {
			return r.DeliveryStatus, r.DeliveryErrorCode
		}
	}
	t.Fatalf("row %s not found", id)
	return "", ""
}

func TestDeliveryReportsMoveForwardOnly(t *testing.T) {
	pool := testenv.Pool(t)
	ctx := context.Background()
	d, reader := audit.NewDeliveries(pool), audit.NewReader(pool)
	e := event(1) // provider fake, message FAKE1
	if err := audit.Write(ctx, pool, []otp.AuditEvent{e}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		status, code     string
		wantStatus, want string
	}{
		{"queued", "", "queued", ""},
		{"delivered", "", "delivered", ""},
		{"sent", "", "delivered", ""}, // late and out of order: ignored
		{"delivered", "", "delivered", ""},
		{"undelivered", "30003", "undelivered", "30003"}, // a terminal report replaces another
	}
	for i, s := range steps {
		if err := d.Report(ctx, otp.DeliveryReport{Provider: "fake", MessageID: e.MessageID, Status: s.status, ErrorCode: s.code}); err != nil {
			t.Fatal(err)
		}
		if st, code := deliveryOf(t, reader, e.ID); st != s.wantStatus || code != s.want {
			t.Fatalf("step %d: %s/%s, want %s/%s", i, st, code, s.wantStatus, s.want)
		}
	}
	// Another provider's message with the same id is another text.
	if err := d.Report(ctx, otp.DeliveryReport{Provider: "twilio", MessageID: e.MessageID, Status: "failed"}); err != nil {
		t.Fatal(err)
	}
	if st, _ := deliveryOf(t, reader, e.ID); st != "undelivered" {
		t.Fatalf("a twilio receipt changed a fake row: %s", st)
	}
}

func TestReceiptBeforeItsRow(t *testing.T) {
	pool := testenv.Pool(t)
	ctx := context.Background()
	d, reader := audit.NewDeliveries(pool), audit.NewReader(pool)
	e := event(2)
	for _, st := range []string{"sent", "queued"} {
		if err := d.Report(ctx, otp.DeliveryReport{Provider: "fake", MessageID: e.MessageID, Status: st}); err != nil {
			t.Fatal(err)
		}
	}
	if err := audit.Write(ctx, pool, []otp.AuditEvent{e}); err != nil {
		t.Fatal(err)
	}
	if st, _ := deliveryOf(t, reader, e.ID); st != "sent" {
		t.Fatalf("early receipts applied as %q, want the furthest, sent", st)
	}
}
