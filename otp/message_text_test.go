package otp

import (
	"strings"
	"testing"
	"time"
)

func languageMessages(t *testing.T) *Messages {
	t.Helper()
	m, err := NewMessages(MessageConfig{
		Default: "{{with .App}}{{.}}: {{end}}Your code is {{.Code}}",
		Locales: map[string]string{
			"pt": "Código: {{.Code}}", "ja": "{{with .App}}【{{.}}】{{end}}認証コード：{{.Code}}",
			"es": "Tu código: {{.Code}}", "zh": "验证码{{.Code}}", "zh-TW": "驗證碼{{.Code}}", "fil": "Code mo: {{.Code}}",
		},
		App: "Acme", TTL: 10 * time.Minute,
	}, 6)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The language: the request's locale, the key's, the country's, then the
// default; an unknown locale falls through to the next.
func TestRenderLanguagePrecedence(t *testing.T) {
	m := languageMessages(t)
	for _, tt := range []struct {
		name    string
		o       TextOptions
		country string
		want    string
	}{
		{"Brazil with no locale", TextOptions{}, "BR", "Código: 123456"},
		{"Japan with no locale", TextOptions{}, "JP", "【Acme】認証コード：123456"},
		{"Mexico", TextOptions{}, "MX", "Tu código: 123456"},
		{"Taiwan reads Traditional", TextOptions{}, "TW", "驗證碼123456"},
		{"Hong Kong reads Traditional", TextOptions{}, "HK", "驗證碼123456"},
		{"a country with no shipped language", TextOptions{}, "SE", "Acme: Your code is 123456"},
		{"no country", TextOptions{}, "", "Acme: Your code is 123456"},
		{"the request's locale wins", TextOptions{Locale: "es", KeyLocale: "ja"}, "BR", "Tu código: 123456"},
		{"the key's locale next", TextOptions{KeyLocale: "ja"}, "BR", "【Acme】認証コード：123456"},
		{"an unknown request locale falls to the key's", TextOptions{Locale: "xx", KeyLocale: "ja"}, "BR", "【Acme】認証コード：123456"},
		{"an unknown locale falls to the country", TextOptions{Locale: "xx-YY", KeyLocale: "<bad>"}, "BR", "Código: 123456"},
		{"English asked for on a Brazilian number", TextOptions{Locale: "en"}, "BR", "Acme: Your code is 123456"},
		{"script subtag", TextOptions{Locale: "zh-Hant-TW"}, "", "驗證碼123456"},
		{"Simplified by region", TextOptions{Locale: "zh-CN"}, "", "验证码123456"},
		{"Tagalog is Filipino", TextOptions{Locale: "tl"}, "", "Code mo: 123456"},
		{"the key's app name", TextOptions{App: "Globex"}, "JP", "【Globex】認証コード：123456"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := m.Render(tt.o, tt.country, "123456")
			if err != nil || got != tt.want {
				t.Fatalf("got %q %v, want %q", got, err, tt.want)
			}
		})
	}
}

// "en" without an en template is the default: English is what otp.message
// is written in, so a request asking for it must not get the country's.
func TestCountryLanguagesAreShippedTags(t *testing.T) {
	for country, lang := range countryLanguages {
		if len(country) != 2 || normalizeLocale(lang) != lang {
			t.Errorf("%s → %q: want an ISO 3166-1 code and a normalized tag", country, lang)
		}
	}
	for _, c := range []struct{ country, lang string }{{"BR", "pt"}, {"JP", "ja"}, {"DE", "de"}, {"EG", "ar"}, {"BD", "bn"}, {"PH", "fil"}} {
		if got := CountryLanguage(c.country); got != c.lang {
			t.Errorf("CountryLanguage(%s) = %q, want %q", c.country, got, c.lang)
		}
	}
}

// With an app hash the text carries it on a line of its own: last when
// there is no WebOTP domain, just before the "@domain #code" line (which
// WebOTP and iOS need last) when there is one.
func TestRenderAppHashAndWebOTP(t *testing.T) {
	m := languageMessages(t)
	for _, tt := range []struct {
		name string
		o    TextOptions
		want string
	}{
		{"hash", TextOptions{Locale: "es", AppHash: "FA+9qCX9VSu"}, "Tu código: 042042\n\nFA+9qCX9VSu"},
		{"domain", TextOptions{Locale: "es", WebOTPDomain: "login.example.com"}, "Tu código: 042042\n\n@login.example.com #042042"},
		{"both", TextOptions{Locale: "es", WebOTPDomain: "example.com", AppHash: "FA+9qCX9VSu"},
			"Tu código: 042042\n\nFA+9qCX9VSu\n@example.com #042042"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := m.Render(tt.o, "BR", "042042")
			if err != nil || got != tt.want {
				t.Fatalf("got %q %v, want %q", got, err, tt.want)
			}
			lines := strings.Split(got, "\n")
			if tt.o.WebOTPDomain != "" && lines[len(lines)-1] != "@"+tt.o.WebOTPDomain+" #042042" {
				t.Fatalf("the WebOTP line is not last: %q", got)
			}
			if tt.o.AppHash != "" && (!strings.Contains(got, "\n"+tt.o.AppHash) || len(got) > 140) {
				t.Fatalf("no hash line, or over the Retriever's 140 bytes: %q", got)
			}
		})
	}
}

func TestValidAppHash(t *testing.T) {
	for s, want := range map[string]bool{
		"FA+9qCX9VSu": true, "abcdefghijk": true, "0123456789/": true,
		"": false, "FA+9qCX9VS": false, "FA+9qCX9VSuu": false, "FA-9qCX9VSu": false, "FA+9qCX9VS=": false, "FA+9qCX9VSé": false,
	} {
		if got := ValidAppHash(s); got != want {
			t.Errorf("ValidAppHash(%q) = %v, want %v", s, got, want)
		}
	}
}

// SMS Retriever reads a text of at most 140 bytes: one segment, whatever
// the encoding (160 GSM-7 septets or 70 UCS-2 units are 140 bytes).
// CheckAppHash refuses a request's hash that would cross it, naming the
// field; RenderSMS leaves out a key's hash that would.
func TestAppHashWithinOneSegment(t *testing.T) {
	m := languageMessages(t)
	long := strings.Repeat("B", 50)
	fits := TextOptions{Locale: "ja", App: "Acme", AppHash: "FA+9qCX9VSu"}
	over := TextOptions{Locale: "ja", App: long, AppHash: "FA+9qCX9VSu"}
	if err := m.CheckAppHash(fits, "JP", 6); err != nil {
		t.Fatalf("a hash that fits: %v", err)
	}
	err := m.CheckAppHash(over, "JP", 6)
	if ErrorCode(err) != EInvalidRequest || !strings.Contains(err.Error(), "app_hash: ") || !strings.Contains(err.Error(), "2 SMS segments") {
		t.Fatalf("a hash past one segment: %v", err)
	}
	if err := m.CheckAppHash(TextOptions{Locale: "ja", App: long + long}, "JP", 6); err != nil {
		t.Fatalf("no hash, never refused: %v", err)
	}
	// Exactly 160 GSM-7 septets is one segment, with the hash in them.
	edge := TextOptions{App: strings.Repeat("a", 160-len(": Your code is 123456\n\nFA+9qCX9VSu")), AppHash: "FA+9qCX9VSu"}
	if err := m.CheckAppHash(edge, "", 6); err != nil {
		t.Fatalf("160 septets: %v", err)
	}
	edge.App += "a"
	if err := m.CheckAppHash(edge, "", 6); err == nil {
		t.Fatal("161 septets passed")
	}

	text, size, err := m.RenderSMS(over, "JP", "123456")
	if err != nil || strings.Contains(text, "FA+9qCX9VSu") || size.Segments != 1 || text != "【"+long+"】認証コード：123456" {
		t.Fatalf("a key's hash past one segment: %q %+v %v", text, size, err)
	}
	text, size, err = m.RenderSMS(fits, "JP", "123456")
	if err != nil || text != "【Acme】認証コード：123456\n\nFA+9qCX9VSu" || size.Segments != 1 || size.Encoding != "UCS-2" {
		t.Fatalf("a hash that fits: %q %+v %v", text, size, err)
	}
}
