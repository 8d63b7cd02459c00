package app

import (
	"fmt"
	"log/slog"
	"unicode/utf8"

	"smsgw/otp"
)

// keyText checks an [[api.keys]] entry's text settings: an internal
// service often serves several apps, each with its name, domain and
// Android app. Errors name the key and the field.
func keyText(i int, k APIKey) (otp.TextOptions, error) {
	field := func(name string) string { return fmt.Sprintf("api.keys[%d].%s (key %q)", i, name, k.Name) }
	if k.Locale != "" && !otp.ValidLocale(k.Locale) {
		return otp.TextOptions{}, fmt.Errorf("%s: %q is not a language tag like \"es\" or \"pt-BR\"", field("locale"), k.Locale)
	}
	if utf8.RuneCountInString(k.AppName) > 40 || !utf8.ValidString(k.AppName) {
		return otp.TextOptions{}, fmt.Errorf("%s: at most 40 characters of UTF-8 (it goes into every text)", field("app_name"))
	}
	if !otp.ValidDomain(k.WebOTPDomain) {
		return otp.TextOptions{}, fmt.Errorf("%s: %q is not a host name like \"example.com\"", field("webotp_domain"), k.WebOTPDomain)
	}
	if k.AppHash != "" && !otp.ValidAppHash(k.AppHash) {
		return otp.TextOptions{}, fmt.Errorf("%s: %q is not an SMS Retriever hash: 11 characters of A-Z a-z 0-9 + / (docs/autofill.md)", field("app_hash"), k.AppHash)
	}
	return otp.TextOptions{KeyLocale: k.Locale, App: k.AppName, WebOTPDomain: k.WebOTPDomain, AppHash: k.AppHash}, nil
}

// warnLongTexts logs every configured template that takes more than one SMS
// segment with the deployment's settings or with an API key's: a text of
// two segments costs twice, and Android's SMS Retriever reads none over 140
// bytes (one segment).
func warnLongTexts(cfg *Config, log *slog.Logger) {
	check := func(key string, o otp.TextOptions) {
		for _, size := range cfg.messages.Sizes(cfg.OTP.Length, o) {
			if size.Segments <= 1 {
				continue
			}
			template := "otp.message"
			if size.Locale != "" {
				template = "otp.messages." + size.Locale
			}
			log.Warn("code text takes more than one SMS segment", "template", template, "api_key", key,
				"encoding", size.Encoding, "length", size.Units, "segments", size.Segments)
		}
	}
	check("", otp.TextOptions{})
	for _, k := range cfg.apiKeys {
		if k.Text != (otp.TextOptions{}) {
			check(k.Name, k.Text)
		}
	}
}
