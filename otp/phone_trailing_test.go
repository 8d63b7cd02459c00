package otp

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// libphonenumber strips trailing characters that are neither digits, letters
// nor '#' before it parses; smsgw reads the same numbers it does.
func TestParsePhoneTrailingCharacters(t *testing.T) {
	tests := []struct {
		name, raw, want string // want "": invalid_phone
	}{
		{"a trailing comma", "+24762889,", "+24762889"},
		{"a trailing full stop", "+1 415 555 2671.", "+14155552671"},
		{"a closing parenthesis", "(415) 555-2671)", "+14155552671"},
		{"a right-to-left mark after the number", "+14155552671\u200f", "+14155552671"},
		{"a left-to-right mark after the number", "+447400123456\u200e", "+447400123456"},
		{"bidi isolates around the number", "\u2068+14155552671\u2069", "+14155552671"},
		{"first-strong isolate in national notation", "\u2068(415) 555-2671\u2069", "+14155552671"},
		{"an emoji after the number", "+14155552671 📱", "+14155552671"},
		{"an emoji and punctuation", "+44 7400 123456!!! 🙂", "+447400123456"},
		{"no-break and ideographic spaces", "+14155552671\u00a0\u3000", "+14155552671"},
		{"junk alone", "📱,\u200f", ""},
		{"junk inside the number still refuses", "+1415📱5552671", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePhone(tt.raw, "US")
			if tt.want == "" {
				if err == nil {
					t.Fatalf("ParsePhone(%q) = %s, want invalid_phone", tt.raw, p.E164)
				}
				return
			}
			if err != nil || p.E164 != tt.want {
				t.Fatalf("ParsePhone(%q) = %q, %v; want %s", tt.raw, p.E164, err, tt.want)
			}
		})
	}
}

// FuzzParsePhoneTrailing: whatever libphonenumber would strip from the end
// changes nothing about the number read.
func FuzzParsePhoneTrailing(f *testing.F) {
	for _, s := range [][2]string{{"+24762889", ","}, {"+14155552671", "\u200f"}, {"(415) 555-2671", " 📱"}, {"+447400123456", "\u2069"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, raw, tail string) {
		tail = strings.Map(func(r rune) rune {
			if unicode.IsNumber(r) || unicode.IsLetter(r) || r == '#' || isControl(r) || r == utf8.RuneError {
				return -1
			}
			return r
		}, tail)
		if len(raw)+len(tail) > maxPhoneInput {
			return
		}
		want, werr := ParsePhone(raw, "US")
		got, gerr := ParsePhone(raw+tail, "US")
		if werr == nil && (gerr != nil || got.E164 != want.E164) {
			t.Fatalf("%q reads %s, with %q after it %q %v", raw, want.E164, tail, got.E164, gerr)
		}
	})
}
