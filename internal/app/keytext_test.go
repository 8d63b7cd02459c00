package app

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

const keyHead = "[[api.keys]]\nname = \"shop\"\nsha256 = \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"\nenabled = true\n"

// A key's bad text setting stops start-up naming the key and the field.
func TestKeyTextSettingsAreValidated(t *testing.T) {
	for _, tt := range []struct{ name, extra, field string }{
		{"short hash", "app_hash = \"FA+9qCX9VS\"\n", "api.keys[0].app_hash"},
		{"hash with a dash", "app_hash = \"FA-9qCX9VSu\"\n", "api.keys[0].app_hash"},
		{"domain with a scheme", "webotp_domain = \"https://shop.example\"\n", "api.keys[0].webotp_domain"},
		{"locale", "locale = \"pt BR\"\n", "api.keys[0].locale"},
		{"long app name", "app_name = \"" + strings.Repeat("a", 41) + "\"\n", "api.keys[0].app_name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadConfig(writeConfig(t, keyHead+tt.extra), noEnv)
			if err == nil || !strings.Contains(err.Error(), tt.field) || !strings.Contains(err.Error(), `"shop"`) {
				t.Fatalf("err = %v, want it to name %s and the key", err, tt.field)
			}
		})
	}
	cfg, err := LoadConfig(writeConfig(t, keyHead+"app_hash = \"FA+9qCX9VSu\"\nlocale = \"pt-BR\"\napp_name = \"Shop\"\nwebotp_domain = \"shop.example\"\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if k := cfg.apiKeys[0].Text; k.AppHash != "FA+9qCX9VSu" || k.KeyLocale != "pt-BR" || k.App != "Shop" || k.WebOTPDomain != "shop.example" {
		t.Fatalf("key text %+v", k)
	}
}

// A template that takes two segments, with the deployment's settings or a
// key's, is a start-up warning naming it; the shipped ones are not.
func TestLongTextsAreWarned(t *testing.T) {
	warnings := func(body string) string {
		t.Helper()
		cfg, err := LoadConfig(writeConfig(t, body), noEnv)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		warnLongTexts(cfg, slog.New(slog.NewTextHandler(&b, nil)))
		return b.String()
	}
	if w := warnings(""); w != "" {
		t.Fatalf("the shipped texts warn: %s", w)
	}
	w := warnings("[otp.messages]\nsv = \"Din verifieringskod är {{.Code}}. " + strings.Repeat("Dela den inte med någon. ", 6) + "\"\n")
	if !strings.Contains(w, "template=otp.messages.sv") || !strings.Contains(w, "segments=2") {
		t.Fatalf("warnings %q", w)
	}
	w = warnings(keyHead + "app_name = \"The Very Long Brand Name Of This App\"\nwebotp_domain = \"verification.accounts.example.com\"\n")
	if !strings.Contains(w, "api_key=shop") || !strings.Contains(w, "template=otp.messages.es") {
		t.Fatalf("warnings %q", w)
	}
}
