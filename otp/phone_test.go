package otp

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/nyaruka/phonenumbers"
)

func TestParsePhone(t *testing.T) {
	tests := []struct {
		name, raw, region string
		want              string // E.164; empty means invalid_phone
		country           string
	}{
		{"national US notation", "(415) 555-2671", "US", "+14155552671", "US"},
		{"dots and spaces", "415.555.2671", "US", "+14155552671", "US"},
		{"international with spaces", "+44 7400 123456", "US", "+447400123456", "GB"},
		{"international ignores region", "+4915123456789", "FR", "+4915123456789", "DE"},
		{"lower-case region", "07400 123456", "gb", "+447400123456", "GB"},
		{"00 international prefix from GB", "0033 6 12 34 56 78", "GB", "+33612345678", "FR"},
		{"00 prefix where the region dials 011", "00 44 20 7946 0958", "US", "+442079460958", "GB"},
		{"00 prefix, no spaces, from Canada", "0049 30 12345678", "CA", "+493012345678", "DE"},
		{"00 prefix with dashes", "00-33-6-12-34-56-78", "US", "+33612345678", "FR"},
		{"00 prefix of an invalid number", "00 44 20 7946 095", "US", "", ""},
		{"00 prefix then letters", "00 44 CALL ME", "US", "", ""},
		{"011 from the US", "011 44 20 7946 0958", "US", "+442079460958", "GB"},
		{"tel URI", "tel:+1-415-555-2671", "", "+14155552671", "US"},
		{"letters", "call me maybe", "US", "", ""},
		{"too short", "12", "US", "", ""},
		{"unknown country code", "+999 1234 5678", "US", "", ""},
		{"valid shape, unassigned range", "+1 555 555 5555", "US", "", ""},
		{"national number, no region", "415 555 2671", "", "", ""},
		{"national number, unknown region", "415 555 2671", "ZZ", "", ""},
		{"5000 digits", strings.Repeat("5", 5000), "US", "", ""},
		{"NUL byte", "+1415555\x002671", "US", "", ""},
		{"newline injection", "+14155552671\nX-Evil: 1", "US", "", ""},
		{"invalid UTF-8", "+1415\xff5552671", "US", "", ""},
		{"only spaces", "   ", "US", "", ""},
		{"empty", "", "US", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePhone(tt.raw, tt.region)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("ParsePhone(%q) = %+v, want invalid_phone", tt.raw, p)
				}
				if code := ErrorCode(err); code != EInvalidPhone {
					t.Fatalf("code = %s, want %s", code, EInvalidPhone)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParsePhone(%q): %v", tt.raw, err)
			}
			if p.E164 != tt.want || p.Country() != tt.country {
				t.Fatalf("got %+v, want %s in %s", p, tt.want, tt.country)
			}
		})
	}
}

func TestParsePhoneNumberType(t *testing.T) {
	for _, tt := range []struct{ raw, typ string }{
		{"+447400123456", "mobile"},
		{"+442079460000", "fixed_line"},
		{"+14155552671", "fixed_line_or_mobile"},
		{"+18005550199", "toll_free"},
	} {
		t.Run(tt.raw, func(t *testing.T) {
			p, err := ParsePhone(tt.raw, "")
			if err != nil {
				t.Fatal(err)
			}
			if p.Type != tt.typ {
				t.Fatalf("type = %s, want %s", p.Type, tt.typ)
			}
		})
	}
}

func TestValidRegion(t *testing.T) {
	for s, want := range map[string]bool{"US": true, "gb": true, "Zz": true, "": false, "USA": false, "U1": false, "é": false, "U": false} {
		if got := ValidRegion(s); got != want {
			t.Errorf("ValidRegion(%q) = %v, want %v", s, got, want)
		}
	}
}

// FuzzParsePhone: no input panics, every accepted number is E.164 that
// parses back to itself, and smsgw accepts what phonenumbers accepts once
// the trailing characters libphonenumber strips are gone.
func FuzzParsePhone(f *testing.F) {
	for _, s := range []string{"(415) 555-2671", "+44 7400 123456", "tel:+1-415-555-2671", "0033 6 12 34 56 78", "+", "++1", "\x00", "+1 (((((", "１２３"} {
		f.Add(s, "US")
	}
	f.Fuzz(func(t *testing.T, raw, region string) {
		p, err := ParsePhone(raw, region)
		if err != nil {
			if ErrorCode(err) != EInvalidPhone {
				t.Fatalf("error code %s for %q", ErrorCode(err), raw)
			}
			if len(raw) <= maxPhoneInput && !strings.ContainsFunc(raw, isControl) && utf8.ValidString(raw) {
				if num, err := phonenumbers.Parse(trimUnwantedEnd(raw), strings.ToUpper(region)); err == nil && phonenumbers.IsValidNumber(num) {
					t.Fatalf("refused %q, which phonenumbers.IsValidNumber accepts", raw)
				}
			}
			return
		}
		if !strings.HasPrefix(p.E164, "+") || len(p.E164) > 16 {
			t.Fatalf("not E.164: %q from %q", p.E164, raw)
		}
		for _, c := range p.E164[1:] {
			if c < '0' || c > '9' {
				t.Fatalf("not E.164: %q from %q", p.E164, raw)
			}
		}
		again, err := ParsePhone(p.E164, "")
		if err != nil || again.E164 != p.E164 || again.Type != p.Type || again.Country() != p.Country() {
			t.Fatalf("E.164 %q does not parse back to itself: %+v %v", p.E164, again, err)
		}
		// The type lookup stands in for IsValidNumber: they must agree,
		// on the notation as written or, for a 00 prefix the region does
		// not dial with, as international.
		num, err := phonenumbers.Parse(trimUnwantedEnd(raw), strings.ToUpper(region))
		if rest, ok := zeroZeroPrefixed(raw); (err != nil || !phonenumbers.IsValidNumber(num)) && ok {
			num, err = phonenumbers.Parse("+"+rest, "")
		}
		if err != nil || !phonenumbers.IsValidNumber(num) {
			t.Fatalf("accepted %q, which phonenumbers.IsValidNumber refuses", raw)
		}
	})
}

// TestInvalidPhoneSaysHowToWriteIt: a number read in the default region's
// national notation and found invalid gets a hint; one written with "+"
// does not need one.
func TestInvalidPhoneSaysHowToWriteIt(t *testing.T) {
	for _, tt := range []struct {
		name, raw, region string
		hint              bool
	}{
		{"00 prefix of an invalid number", "00 44 20 7946 095", "US", true},
		{"national, too short", "(415) 555-267", "US", true},
		{"international", "+44 20 7946 095", "US", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePhone(tt.raw, tt.region)
			var e *Error
			if !errors.As(err, &e) || e.Code != EInvalidPhone {
				t.Fatalf("%v", err)
			}
			got := strings.Contains(e.Message, `"+44 7400 123456"`) && strings.Contains(e.Message, `"region"`) &&
				strings.Contains(e.Message, "region "+tt.region)
			if got != tt.hint {
				t.Fatalf("message %q: hint %v, want %v", e.Message, got, tt.hint)
			}
		})
	}
}

func TestPhoneDependent(t *testing.T) {
	tests := []struct {
		name, raw string
		want      bool
	}{
		{"United Kingdom", "+447400123456", false},
		{"Jersey, inside +44 7", "+447797123456", true},
		{"Isle of Man", "+447624123456", true},
		{"United States", "+14155552671", false},
		{"Canada, under +1", "+14165550123", true},
		{"Jamaica, under +1", "+18768765432", true},
		{"Germany, a code of its own", "+4915123456789", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePhone(tt.raw, "")
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Dependent(); got != tt.want {
				t.Errorf("%s (%s).Dependent() = %v, want %v", tt.raw, p.Country(), got, tt.want)
			}
		})
	}
	if (Phone{}).Dependent() {
		t.Error("the zero Phone is dependent")
	}
}

// The invalid_phone hint's example is a valid mobile, which the default
// policy (mobile numbers) lets through.
func TestHintNumberIsAMobile(t *testing.T) {
	p, err := ParsePhone(hintNumber, "")
	if err != nil || p.Type != "mobile" {
		t.Fatalf("%s: type %q, err %v; want a valid mobile", hintNumber, p.Type, err)
	}
}
