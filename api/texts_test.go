package api_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"smsgw/internal/app"
	"smsgw/otp"
)

// codeDigits finds the code in a text.
var codeDigits = regexp.MustCompile(`[0-9]{6}`)

// The text a send makes: the number's language, the key's brand, domain
// and app hash, the request's app hash over the key's; a bad app_hash is
// 400 naming the field; every text's segments are counted by country.
func TestSendTexts(t *testing.T) {
	const ios, android = "ios-app-key-0123456789", "android-app-key-0123456789"
	s := newTestServer(t, serverOpts{config: func(c *app.Config) {
		c.API.Keys = []app.APIKey{
			{Name: "ios", SHA256: digest(ios), Enabled: true, AppName: "Globex", WebOTPDomain: "globex.example"},
			{Name: "android", SHA256: digest(android), Enabled: true, AppName: "Acme", Locale: "ja", AppHash: "FA+9qCX9VSu"},
		}
	}})
	bearer := func(k string) map[string]string { return map[string]string{"Authorization": "Bearer " + k} }
	last := func(phone string) string {
		t.Helper()
		msgs := s.outbox.Messages(phone)
		if len(msgs) == 0 {
			t.Fatalf("no text to %s", phone)
		}
		return msgs[len(msgs)-1].Body
	}
	for _, tt := range []struct {
		name, key, body, phone string
		want                   []string // the text's lines, the code as 0
	}{
		{"a Brazilian number in Portuguese", ios, `{"phone": "+55 11 91234 5678"}`, "+5511912345678",
			[]string{"Globex: Código de verificação: 0", "", "@globex.example #0"}},
		{"the request's locale first", ios, `{"phone": "+55 11 91234 5679", "locale": "es-MX"}`, "+5511912345679",
			[]string{"Globex: Tu código de verificación: 0", "", "@globex.example #0"}},
		{"the key's locale over the country's, its hash last", android, `{"phone": "+55 11 91234 5670"}`, "+5511912345670",
			[]string{"【Acme】認証コード：0（10分間有効）", "", "FA+9qCX9VSu"}},
		{"the request's hash over the key's", android, `{"phone": "+81 90 1234 5678", "app_hash": "abc/DEF+123"}`, "+819012345678",
			[]string{"【Acme】認証コード：0（10分間有効）", "", "abc/DEF+123"}},
		{"a request's hash before the key's WebOTP line", ios, `{"phone": "+49 1512 3456789", "app_hash": "abc/DEF+123"}`, "+4915123456789",
			[]string{"Globex: Ihr Bestätigungscode lautet 0. Er ist 10 Minuten gültig.", "", "abc/DEF+123", "@globex.example #0"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if r := send(t, s, tt.body, bearer(tt.key)); r.Status != 202 {
				t.Fatalf("%d %s", r.Status, r.Raw)
			}
			got := last(tt.phone)
			lines := strings.Split(got, "\n")
			for i := range lines {
				lines[i] = codeDigits.ReplaceAllString(lines[i], "0")
			}
			if strings.Join(lines, "\n") != strings.Join(tt.want, "\n") {
				t.Fatalf("text %q, want lines %q", got, tt.want)
			}
		})
	}
	for _, bad := range []string{`"FA+9qCX9VS"`, `"FA+9qCX9VSu1"`, `"FA-9qCX9VSu"`, `"FA+9qCX9VS="`, `11`} {
		r := send(t, s, `{"phone": "+55 11 91234 5671", "app_hash": `+bad+`}`, bearer(ios))
		if r.Status != 400 || r.ErrorCode() != "invalid_request" || !strings.Contains(string(r.Raw), "app_hash") {
			t.Fatalf("app_hash %s: %d %s", bad, r.Status, r.Raw)
		}
	}
	m := do(t, http.MethodGet, s.URL+"/metrics", "", nil, nil)
	for _, want := range []string{`smsgw_sms_segments_total{country="BR"} 3`, `smsgw_sms_segments_total{country="JP"} 1`, `smsgw_sms_segments_total{country="DE"} 1`} {
		if !strings.Contains(string(m.Raw), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// Android's SMS Retriever reads only a text of one segment (140 bytes). A
// request whose app_hash would push its text past that is 400 naming the
// field, before any quota is taken or code made; a key's own hash that
// would is left out of that text (the start-up warning names the template),
// so the text stays one segment.
func TestSendAppHashPastOneSegment(t *testing.T) {
	const brand = "brand-key-0123456789"
	long := strings.Repeat("B", 40) // the longest app_name a key may set
	s := newTestServer(t, serverOpts{config: func(c *app.Config) {
		c.API.Keys = []app.APIKey{{Name: "brand", SHA256: digest(brand), Enabled: true, AppName: long, Locale: "ja", AppHash: "FA+9qCX9VSu"}}
	}})
	bearer := map[string]string{"Authorization": "Bearer " + brand}

	r := send(t, s, `{"phone": "+81 90 1234 5671", "app_hash": "abc/DEF+123"}`, bearer)
	if r.Status != 400 || r.ErrorCode() != "invalid_request" || !strings.Contains(string(r.Raw), "app_hash") ||
		!strings.Contains(string(r.Raw), "2 SMS segments") {
		t.Fatalf("a hash past one segment: %d %s", r.Status, r.Raw)
	}
	if msgs := s.outbox.Messages("+819012345671"); len(msgs) != 0 {
		t.Fatalf("texted: %v", msgs)
	}
	// No quota was taken: the number's one-a-minute window is still free.
	if r := send(t, s, `{"phone": "+81 90 1234 5671"}`, bearer); r.Status != 202 {
		t.Fatalf("the same number without app_hash: %d %s", r.Status, r.Raw)
	}
	body := s.outbox.Messages("+819012345671")[0].Body
	if strings.Contains(body, "FA+9qCX9VSu") || !strings.HasPrefix(body, "【"+long+"】") {
		t.Fatalf("the key's hash past one segment is sent: %q", body)
	}
	if size := otp.MeasureSMS(body); size.Segments != 1 {
		t.Fatalf("text %q takes %d segments", body, size.Segments)
	}
	// Where the hash fits (a GSM-7 language), the request's is sent.
	if r := send(t, s, `{"phone": "+49 1512 3456780", "locale": "de", "app_hash": "abc/DEF+123"}`, bearer); r.Status != 202 {
		t.Fatalf("a hash that fits: %d %s", r.Status, r.Raw)
	}
	if body := s.outbox.Messages("+4915123456780")[0].Body; !strings.HasSuffix(body, "\n\nabc/DEF+123") {
		t.Fatalf("text %q", body)
	}
}
