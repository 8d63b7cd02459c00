package console_test

import (
	"context"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"smsgw/internal/app"
	"smsgw/otp"
)

// keyWindowRE is the 1h window's "used" cell on the limit-key page.
var keyWindowRE = regexp.MustCompile(`<td>1h</td><td class="num">(\d+)</td><td class="num">3</td>`)

// TestLimitKeyLookUpAndReset: the support desk finds what one account's
// sends have used and clears it; the value never reaches the audit row.
func TestLimitKeyLookUpAndReset(t *testing.T) {
	r := newRigWith(t, false, nil, func(c *app.Config) {
		c.Limits.Key = []app.KeyLimit{{Name: "user_id", Window: app.Duration{Duration: time.Hour}, Max: 3}}
	})
	const value = "account-7f3a"
	for i, phone := range []string{"+14155552681", "+14155552682"} {
		row := otp.AuditEvent{ID: uuid.Must(uuid.NewV7()).String(), Time: time.Now().UTC(), Kind: otp.KindSend}
		// Each request has its own ticket, as the API gives it: the windows
		// count requests by their tickets.
		req := otp.SendRequest{Ticket: row.ID, RequestID: row.ID, Phone: phone, ClientIP: netip.AddrFrom4([4]byte{203, 0, 113, byte(10 + i)}),
			LimitKeys: map[string]string{"user_id": value}, Row: row}
		_, err := r.svc.Service.Send(context.Background(), req)
		if err != nil {
			t.Fatalf("send %s: %v", phone, err)
		}
	}
	b := r.browser(t)
	b.signIn(token)

	empty := b.get("/console/keys")
	if empty.status != http.StatusOK || !strings.Contains(empty.body, `<option value="user_id"`) {
		t.Fatalf("the look-up form does not offer user_id: %d %.2000s", empty.status, empty.body)
	}
	p := b.get("/console/keys?" + url.Values{"name": {"user_id"}, "value": {value}}.Encode())
	if m := keyWindowRE.FindStringSubmatch(p.body); m == nil || m[1] != "2" {
		t.Fatalf("user_id's 1h window: %v, want 2 used\n%.3000s", m, p.body)
	}
	other := b.get("/console/keys?" + url.Values{"name": {"user_id"}, "value": {"someone-else"}}.Encode())
	if m := keyWindowRE.FindStringSubmatch(other.body); m == nil || m[1] != "0" {
		t.Fatalf("another value's window: %v, want 0 used", m)
	}

	done := b.post("/console/keys/reset", url.Values{"name": {"user_id"}, "value": {value}, "csrf": {csrf(t, p)}})
	if !strings.Contains(done.body, "Limits reset") {
		t.Fatalf("after reset: %d %.2000s", done.status, done.body)
	}
	if m := keyWindowRE.FindStringSubmatch(done.body); m == nil || m[1] != "0" {
		t.Fatalf("after reset the window shows %v, want 0", m)
	}

	unknown := b.get("/console/keys?name=account&value=x")
	if unknown.status != http.StatusBadRequest || !strings.Contains(unknown.body, "not a configured limit key") {
		t.Fatalf("an unknown key: %d %.1000s", unknown.status, unknown.body)
	}

	requireAdminRows(t, r.pool, "console.keys.get:key user_id ok", "console.limits.delete:key user_id ok", "console.keys.get:key account invalid_request")
	for _, row := range adminRows(t, r.pool) {
		if strings.Contains(row, value) {
			t.Fatalf("an audit row holds the key's value: %q", row)
		}
	}
}
