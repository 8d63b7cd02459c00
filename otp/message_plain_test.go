package otp

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestPlainTemplatesRenderAsExecuted: a template Render writes by its
// pieces writes what text/template writes, for every text config.toml
// ships (each of which must be plain, or Render would not use the pieces)
// and for templates at the edges of what is plain, with and without an
// app name, with expiries of 0, 5 and 150 minutes.
func TestPlainTemplatesRenderAsExecuted(t *testing.T) {
	toml, err := os.ReadFile("../config.toml")
	if err != nil {
		t.Fatal(err)
	}
	templates := map[string]bool{} // text: want plain
	for _, m := range regexp.MustCompile(`(?m)^[\w-]+ = ("\{\{.*")\s*$`).FindAllStringSubmatch(string(toml), -1) {
		text, err := strconv.Unquote(m[1])
		if err != nil {
			t.Fatalf("%s: %v", m[1], err)
		}
		templates[text] = true
	}
	if len(templates) < 20 {
		t.Fatalf("found %d texts in config.toml", len(templates))
	}
	for text, plain := range map[string]bool{
		"{{.Code}}": true,
		"{{- .Code -}}  is it {{ .TTLMinutes }} ":                  true,
		"{{with .TTLMinutes}}{{.}} min, {{end}}{{.Code}}":          true,
		"{{with .Code}}[{{.}}]{{end}}":                             true,
		"{{.App}}{{.App}}{{.Code}}{{with .App}}{{end}}":            true,
		"{{/* a comment */}}{{.Code}}":                             true,
		"{{if .App}}{{.App}}: {{end}}{{.Code}}":                    false,
		"{{with .App}}{{.}}{{else}}Us{{end}}: {{.Code}}":           false,
		"{{with .App}}{{.}}{{.}}{{with .}}{{end}}{{end}}{{.Code}}": false,
		`{{.Code | printf "%s"}}`:                                  false,
		`{{"lit"}}{{.Code}}`:                                       false,
		`{{$c := .Code}}{{$c}}`:                                    false,
		`{{define "x"}}{{.Code}}{{end}}{{template "x" .}}`:         false,
		"{{range .Code}}{{end}}{{.Code}}":                          false,
	} {
		templates[text] = plain
	}
	for text, plain := range templates {
		m, err := NewMessages(MessageConfig{Default: text, TTL: 5 * 60e9}, 6)
		if err != nil {
			if !plain && strings.Contains(err.Error(), "range") {
				continue // a range over a string does not execute
			}
			t.Fatalf("%q: %v", text, err)
		}
		if _, ok := m.plain[m.base]; ok != plain {
			t.Fatalf("%q: plain %v, want %v", text, ok, plain)
		}
		for _, app := range []string{"", "Acme", "A&B <x> {{.Code}}"} {
			for _, ttl := range []int{0, 5, 150} {
				data := messageData{Code: "123456", App: app, TTLMinutes: ttl}
				var got, want strings.Builder
				if err := m.execute(&got, m.base, data, 0); err != nil {
					t.Fatal(err)
				}
				if err := m.base.Execute(&want, data); err != nil {
					t.Fatal(err)
				}
				if got.String() != want.String() {
					t.Fatalf("%q with %+v:\n got %q\nwant %q", text, data, got.String(), want.String())
				}
			}
		}
	}
}
