package otp

import (
	"strings"
	"testing"
	"time"
)

func testMessages(t *testing.T, domain string) *Messages {
	t.Helper()
	m, err := NewMessages(MessageConfig{
		Default: "Your {{.App}} code is {{.Code}}. It expires in {{.TTLMinutes}} minutes.",
		Locales: map[string]string{"es": "Tu codigo es {{.Code}}", "pt_BR": "Seu codigo e {{.Code}}", "pt": "O seu codigo e {{.Code}}"},
		App:     "Acme", TTL: 90 * time.Second, WebOTPDomain: domain,
	}, 6)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestRenderChoosesTheLocale(t *testing.T) {
	m := testMessages(t, "")
	for _, tt := range []struct{ locale, want string }{
		{"", "Your Acme code is 123456. It expires in 2 minutes."},
		{"en-US", "Your Acme code is 123456. It expires in 2 minutes."},
		{"es", "Tu codigo es 123456"},
		{"es-MX", "Tu codigo es 123456"},
		{"ES_mx", "Tu codigo es 123456"},
		{"pt-BR", "Seu codigo e 123456"},
		{"pt-PT", "O seu codigo e 123456"},
		{"pt", "O seu codigo e 123456"},
		{"x-<script>", "Your Acme code is 123456. It expires in 2 minutes."},
	} {
		t.Run(tt.locale, func(t *testing.T) {
			got, err := m.Render(TextOptions{Locale: tt.locale}, "", "123456")
			if err != nil || got != tt.want {
				t.Fatalf("got %q %v, want %q", got, err, tt.want)
			}
		})
	}
}

func TestRenderAddsTheWebOTPLine(t *testing.T) {
	got, err := testMessages(t, "login.example.com").Render(TextOptions{Locale: "es"}, "", "042042")
	if err != nil {
		t.Fatal(err)
	}
	if want := "Tu codigo es 042042\n\n@login.example.com #042042"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestNewMessagesNamesTheBrokenKey(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  MessageConfig
		key  string
	}{
		{"syntax", MessageConfig{Default: "Code {{.Code"}, "otp.message"},
		{"unknown field", MessageConfig{Default: "Code {{.Pin}}"}, "otp.message"},
		{"no code", MessageConfig{Default: "Hello"}, "otp.message"},
		{"locale syntax", MessageConfig{Default: "{{.Code}}", Locales: map[string]string{"es": "{{if}}"}}, "otp.messages.es"},
		{"locale without code", MessageConfig{Default: "{{.Code}}", Locales: map[string]string{"de": "Hallo"}}, "otp.messages.de"},
		{"locale key", MessageConfig{Default: "{{.Code}}", Locales: map[string]string{"e s": "{{.Code}}"}}, "otp.messages.e s"},
		{"domain", MessageConfig{Default: "{{.Code}}", WebOTPDomain: "https://example.com"}, "otp.webotp_domain"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewMessages(tt.cfg, 6)
			if err == nil || !strings.Contains(err.Error(), tt.key) {
				t.Fatalf("err = %v, want it to name %s", err, tt.key)
			}
		})
	}
}

func TestMeasureSMS(t *testing.T) {
	for _, tt := range []struct {
		name, text string
		enc        string
		units, seg int
	}{
		{"plain", "Your code is 123456", "GSM-7", 19, 1},
		{"GSM accents", "Bestätigungscode é ñ", "GSM-7", 20, 1},
		{"escape chars count twice", "{code} €", "GSM-7", 11, 1},
		{"160 fit one segment", strings.Repeat("a", 160), "GSM-7", 160, 1},
		{"161 take two", strings.Repeat("a", 161), "GSM-7", 161, 2},
		{"one accent outside GSM", "Tu código es 123456", "UCS-2", 19, 1},
		{"71 UCS-2 take two", "ó" + strings.Repeat("a", 70), "UCS-2", 71, 2},
		{"emoji is two units", "🔑 123456", "UCS-2", 9, 1},
		{"escapes count two toward 160", strings.Repeat("a", 158) + "€", "GSM-7", 160, 1},
		{"an escape past 160 takes two", strings.Repeat("a", 159) + "€", "GSM-7", 161, 2},
		{"306 GSM-7 take two of 153", strings.Repeat("a", 306), "GSM-7", 306, 2},
		{"307 GSM-7 take three", strings.Repeat("a", 307), "GSM-7", 307, 3},
		{"134 UCS-2 take two of 67", "ó" + strings.Repeat("a", 133), "UCS-2", 134, 2},
		{"135 UCS-2 take three", "ó" + strings.Repeat("a", 134), "UCS-2", 135, 3},
		{"70 units with an emoji", "🔑" + strings.Repeat("a", 68), "UCS-2", 70, 1},
		{"71 units with an emoji", "🔑" + strings.Repeat("a", 69), "UCS-2", 71, 2},
		{"Cyrillic", "Ваш код: 123456", "UCS-2", 15, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := MeasureSMS(tt.text)
			if got.Encoding != tt.enc || got.Units != tt.units || got.Segments != tt.seg {
				t.Fatalf("got %+v, want %s %d units %d segments", got, tt.enc, tt.units, tt.seg)
			}
		})
	}
}

func TestSecrets(t *testing.T) {
	if _, err := NewSecrets("short"); err == nil {
		t.Fatal("accepted a short secret")
	}
	a, err := NewSecrets(strings.Repeat("a", 32))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewSecrets(strings.Repeat("b", 32))
	if string(a.MAC("+1", "123456")) == string(a.MAC("+2", "123456")) {
		t.Fatal("the MAC does not bind the phone")
	}
	if string(a.MAC("+1", "123456")) == string(b.MAC("+1", "123456")) {
		t.Fatal("the MAC does not depend on the secret")
	}
	sealed, err := a.Seal("+1", "123456")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sealed), "123456") {
		t.Fatal("sealed code holds the code in clear")
	}
	if code, err := a.Open("+1", sealed); err != nil || code != "123456" {
		t.Fatalf("open: %q %v", code, err)
	}
	if _, err := a.Open("+2", sealed); err != ErrSealBroken {
		t.Fatalf("opened for another phone: %v", err)
	}
	if _, err := b.Open("+1", sealed); err != ErrSealBroken {
		t.Fatalf("opened under another secret: %v", err)
	}
	if _, err := a.Open("+1", sealed[:5]); err != ErrSealBroken {
		t.Fatalf("opened a truncated seal: %v", err)
	}
	again, _ := a.Seal("+1", "123456")
	if string(again) == string(sealed) {
		t.Fatal("two seals of one code are equal: the nonce is not random")
	}
}

// FuzzCodeComparison: a guess matches the stored code exactly when its
// normalized digits are the code's, however it is written.
func FuzzCodeComparison(f *testing.F) {
	keys, err := NewSecrets(strings.Repeat("k", 32))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"123456", "123 456", "123-456", "0123456", "12345", "١٢٣٤٥٦", "１２３４５６", "123456\x00", " ", "--", "1234567890123456789012345678901234"} {
		f.Add("123456", s)
	}
	f.Fuzz(func(t *testing.T, code, guess string) {
		if len(code) == 0 || len(code) > 10 || strings.Trim(code, "0123456789") != "" {
			return
		}
		norm, err := NormalizeCode(guess)
		if err != nil {
			if ErrorCode(err) != EInvalidRequest {
				t.Fatalf("code %s for %q", ErrorCode(err), guess)
			}
			return
		}
		if strings.Trim(norm, "0123456789") != "" {
			t.Fatalf("normalized %q to non-digits %q", guess, norm)
		}
		stored := keys.MAC("+14155552671", code)
		match := string(keys.MAC("+14155552671", norm)) == string(stored)
		if match != (norm == code) {
			t.Fatalf("guess %q (as %q) vs code %q: match=%v", guess, norm, code, match)
		}
	})
}
