package otp

import (
	"fmt"
	"sort"
	"strings"
	"text/template"
	"time"
	"unicode/utf16"
)

// MessageConfig is the configured text of a code message.
type MessageConfig struct {
	// Default is a text/template with .Code, .App and .TTLMinutes.
	Default string
	// Locales maps BCP 47 tags ("es", "pt-BR") to templates like Default.
	Locales map[string]string
	App     string
	TTL     time.Duration
	// WebOTPDomain, when set, ends every text with "@<domain> #<code>" so
	// browsers (WebOTP) and iOS/Android autofill the code.
	WebOTPDomain string
}

// Messages renders code texts, chosen by locale.
type Messages struct {
	base     *template.Template
	byLocale map[string]*template.Template
	app      string
	ttlMin   int
	domain   string
}

type messageData struct {
	Code       string
	App        string
	TTLMinutes int
}

// NewMessages parses every template and renders each once, so a broken one
// stops the service at start-up rather than failing a send. Errors name the
// configuration key.
func NewMessages(cfg MessageConfig, codeLength int) (*Messages, error) {
	m := &Messages{
		byLocale: make(map[string]*template.Template, len(cfg.Locales)),
		app:      cfg.App,
		ttlMin:   int((cfg.TTL + time.Minute - 1) / time.Minute),
		domain:   cfg.WebOTPDomain,
	}
	if !validDomain(cfg.WebOTPDomain) {
		return nil, fmt.Errorf("otp.webotp_domain: %q is not a host name like \"example.com\"", cfg.WebOTPDomain)
	}
	sample := strings.Repeat("0", codeLength)
	parse := func(key, text string) (*template.Template, error) {
		t, err := template.New(key).Option("missingkey=error").Parse(text)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		var b strings.Builder
		if err := t.Execute(&b, messageData{Code: sample, App: cfg.App, TTLMinutes: m.ttlMin}); err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		if !strings.Contains(b.String(), sample) {
			return nil, fmt.Errorf("%s: the text must contain {{.Code}}", key)
		}
		return t, nil
	}
	var err error
	if m.base, err = parse("otp.message", cfg.Default); err != nil {
		return nil, err
	}
	for tag, text := range cfg.Locales {
		norm := normalizeLocale(tag)
		if norm == "" {
			return nil, fmt.Errorf("otp.messages.%s: not a language tag like \"es\" or \"pt-BR\"", tag)
		}
		if m.byLocale[norm], err = parse("otp.messages."+tag, text); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Render returns the text for code in locale: the exact locale's template,
// else its base language's ("es" for "es-MX"), else the default.
func (m *Messages) Render(locale, code string) (string, error) {
	t := m.template(locale)
	var b strings.Builder
	if err := t.Execute(&b, messageData{Code: code, App: m.app, TTLMinutes: m.ttlMin}); err != nil {
		return "", err
	}
	if m.domain != "" {
		b.WriteString("\n\n@" + m.domain + " #" + code)
	}
	return b.String(), nil
}

func (m *Messages) template(locale string) *template.Template {
	norm := normalizeLocale(locale)
	if norm == "" {
		return m.base
	}
	if t, ok := m.byLocale[norm]; ok {
		return t
	}
	if i := strings.IndexByte(norm, '-'); i > 0 {
		if t, ok := m.byLocale[norm[:i]]; ok {
			return t
		}
	}
	return m.base
}

// Sizes renders every template with a sample code and measures it, default
// first, then locales in order, for start-up logs and the README.
func (m *Messages) Sizes(codeLength int) []TextSize {
	sample := strings.Repeat("0", codeLength)
	out := []TextSize{}
	add := func(locale string) {
		text, err := m.Render(locale, sample)
		if err != nil {
			return
		}
		s := MeasureSMS(text)
		s.Locale = locale
		out = append(out, s)
	}
	add("")
	locales := make([]string, 0, len(m.byLocale))
	for l := range m.byLocale {
		locales = append(locales, l)
	}
	sort.Strings(locales)
	for _, l := range locales {
		add(l)
	}
	return out
}

// normalizeLocale lower-cases a BCP 47 tag and accepts "_" for "-"
// ("pt_BR" → "pt-br"); it returns "" for anything that is not tag-shaped.
func normalizeLocale(s string) string {
	if s == "" || len(s) > 35 {
		return ""
	}
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		switch {
		case c == '_':
			b[i] = '-'
		case c == '-', 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		default:
			return ""
		}
	}
	if b[0] == '-' || b[len(b)-1] == '-' {
		return ""
	}
	return string(b)
}

func validDomain(s string) bool {
	if s == "" {
		return true
	}
	if len(s) > 253 || strings.HasPrefix(s, ".") || strings.HasSuffix(s, ".") || strings.Contains(s, "..") {
		return false
	}
	for _, c := range s {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// TextSize is how an SMS text travels: its encoding, length in that
// encoding's units and the number of segments a carrier bills.
type TextSize struct {
	Locale   string
	Encoding string // "GSM-7" or "UCS-2"
	Units    int    // septets (GSM-7, escapes count 2) or UTF-16 code units
	Segments int
}

// gsm7 is the GSM 03.38 default alphabet; gsm7ext the characters that take an
// escape (two septets).
const (
	gsm7    = "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
	gsm7ext = "^{}\\[~]|€\f"
)

// MeasureSMS says how a text is encoded and into how many segments it splits:
// 160 septets fit one GSM-7 segment (153 each when concatenated); one
// character outside the GSM alphabet makes the whole text UCS-2, 70 units in
// one segment (67 each when concatenated).
func MeasureSMS(text string) TextSize {
	septets := 0
	for _, r := range text {
		switch {
		case strings.ContainsRune(gsm7, r):
			septets++
		case strings.ContainsRune(gsm7ext, r):
			septets += 2
		default:
			units := len(utf16.Encode([]rune(text)))
			return TextSize{Encoding: "UCS-2", Units: units, Segments: segments(units, 70, 67)}
		}
	}
	return TextSize{Encoding: "GSM-7", Units: septets, Segments: segments(septets, 160, 153)}
}

func segments(n, single, multi int) int {
	if n <= single {
		return 1
	}
	return (n + multi - 1) / multi
}
