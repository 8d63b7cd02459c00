package otp

import (
	"cmp"
	"fmt"
	"sort"
	"strings"
	"text/template"
	"time"
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

// TextOptions are what a request and its API key ask of one text; empty
// fields take the configured defaults.
type TextOptions struct {
	Locale    string // the request's
	KeyLocale string // the API key's, when the request names none
	App       string // .App; "" is otp.app_name
	// WebOTPDomain ("" is otp.webotp_domain) and AppHash (Android's SMS
	// Retriever hash, see ValidAppHash) mark the text for autofill.
	WebOTPDomain string
	AppHash      string
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
	if !ValidDomain(cfg.WebOTPDomain) {
		return nil, fmt.Errorf("otp.webotp_domain: %q is not a host name like \"example.com\"", cfg.WebOTPDomain)
	}
	sample := strings.Repeat("0", codeLength)
	parse := func(key, text string) (*template.Template, error) {
		t, err := template.New(key).Option("missingkey=error").Parse(text)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		for _, app := range []string{cfg.App, "", "Acme"} {
			var b strings.Builder
			if err := t.Execute(&b, messageData{Code: sample, App: app, TTLMinutes: m.ttlMin}); err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
			if !strings.Contains(b.String(), sample) {
				return nil, fmt.Errorf("%s: the text must contain {{.Code}}", key)
			}
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

// Render returns the text for code to a number of country (ISO 3166-1, may
// be empty). Its template is the first that exists of: the request's
// locale, the key's locale, the country's language (CountryLanguage), and
// otp.message; an unknown locale falls through, never fails.
//
// With a WebOTP domain the last line is "@<domain> #<code>", as WebOTP and
// iOS/Android autofill require of the last line. With an app hash the hash
// follows the text on a line of its own: Google's SMS Retriever needs only
// that the text hold it (within 140 bytes, one segment), so it goes before
// the WebOTP line when there is one, and ends the text when there is none.
func (m *Messages) Render(o TextOptions, country, code string) (string, error) {
	t := m.choose(o, country)
	app := cmp.Or(o.App, m.app)
	var b strings.Builder
	if err := t.Execute(&b, messageData{Code: code, App: app, TTLMinutes: m.ttlMin}); err != nil {
		return "", err
	}
	if o.AppHash != "" {
		b.WriteString("\n\n" + o.AppHash)
	}
	if domain := cmp.Or(o.WebOTPDomain, m.domain); domain != "" {
		if o.AppHash == "" {
			b.WriteString("\n")
		}
		b.WriteString("\n@" + domain + " #" + code)
	}
	return b.String(), nil
}

func (m *Messages) choose(o TextOptions, country string) *template.Template {
	for _, locale := range []string{o.Locale, o.KeyLocale, CountryLanguage(country)} {
		if t := m.template(locale); t != nil {
			return t
		}
		// otp.message is English unless an operator says otherwise: a
		// request for English with no "en" text gets it, not the country's.
		if norm := normalizeLocale(locale); norm == "en" || strings.HasPrefix(norm, "en-") {
			return m.base
		}
	}
	return m.base
}

// template is locale's template: the exact tag's, else that of the tag
// with its last subtags dropped one by one ("zh-hant-tw", "zh-hant", "zh"),
// each also under its usual alias ("zh-hant" is "zh-tw", "tl" "fil"); nil
// when none is configured.
func (m *Messages) template(locale string) *template.Template {
	norm := normalizeLocale(locale)
	for norm != "" {
		if t, ok := m.byLocale[norm]; ok {
			return t
		}
		if t, ok := m.byLocale[localeAliases[norm]]; ok {
			return t
		}
		i := strings.LastIndexByte(norm, '-')
		if i < 0 {
			break
		}
		norm = norm[:i]
	}
	return nil
}

// Locales are the configured locales, sorted.
func (m *Messages) Locales() []string {
	locales := make([]string, 0, len(m.byLocale))
	for l := range m.byLocale {
		locales = append(locales, l)
	}
	sort.Strings(locales)
	return locales
}

// Sizes renders every template with a sample code and o's app name, WebOTP
// domain and app hash, and measures it: default first, then locales in
// order, for start-up warnings and the docs.
func (m *Messages) Sizes(codeLength int, o TextOptions) []TextSize {
	sample := strings.Repeat("0", codeLength)
	out := []TextSize{}
	for _, l := range append([]string{""}, m.Locales()...) {
		o.Locale, o.KeyLocale = l, ""
		text, err := m.Render(o, "", sample)
		if err != nil {
			continue
		}
		s := MeasureSMS(text)
		s.Locale = l
		out = append(out, s)
	}
	return out
}

// retrieverLimit is what Android's SMS Retriever reads: a text of at most
// 140 bytes, one SMS's user data, so one segment (160 GSM-7 characters or 70
// UCS-2 units); a longer text reaches the app as nothing.
const retrieverLimit = 1

// CheckAppHash reports, as a 400 naming app_hash, a request's app hash that
// would push the text for a number of country past one segment: Android
// would never hand it to the app, and the person would pay two texts for a
// code to type. It renders a sample code as long as a real one, so the
// verdict holds for the code sent. A text without a hash is never refused.
func (m *Messages) CheckAppHash(o TextOptions, country string, codeLength int) error {
	if o.AppHash == "" {
		return nil
	}
	text, err := m.Render(o, country, strings.Repeat("0", codeLength))
	if err != nil {
		return err
	}
	if size := MeasureSMS(text); size.Segments > retrieverLimit {
		return Errorf(EInvalidRequest, "app_hash: with it this number's text takes %d SMS segments (%d %s units), "+
			"and Android's SMS Retriever reads only texts of one (140 bytes: 160 GSM-7 or 70 UCS-2 characters); "+
			"shorten the text's template or app name, or send without app_hash (docs/autofill.md)",
			size.Segments, size.Units, size.Encoding)
	}
	return nil
}

// RenderSMS is Render for a text to send, measured. An app hash (the API
// key's: a request's was checked by CheckAppHash) that would push the text
// past one segment is left out: the SMS Retriever could not read it, and
// the text would cost more. The start-up warning names such templates.
func (m *Messages) RenderSMS(o TextOptions, country, code string) (string, TextSize, error) {
	text, err := m.Render(o, country, code)
	if err != nil {
		return "", TextSize{}, err
	}
	size := MeasureSMS(text)
	if o.AppHash != "" && size.Segments > retrieverLimit {
		o.AppHash = ""
		if text, err = m.Render(o, country, code); err != nil {
			return "", TextSize{}, err
		}
		size = MeasureSMS(text)
	}
	return text, size, nil
}

// ValidAppHash tells whether s is an Android app's SMS Retriever hash: 11
// characters of base64 (A-Z a-z 0-9 + /), as Google's recipe makes it.
func ValidAppHash(s string) bool {
	if len(s) != 11 {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '+' || c == '/') {
			return false
		}
	}
	return true
}

// ValidLocale tells whether s is shaped like a BCP 47 tag ("es", "pt-BR",
// "pt_BR"); whether a template exists for it is another matter.
func ValidLocale(s string) bool { return normalizeLocale(s) != "" }

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

// ValidDomain tells whether s is empty or a host name for a WebOTP line.
func ValidDomain(s string) bool {
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
