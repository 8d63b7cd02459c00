package api

import (
	"bytes"
	"encoding/json"
	"testing"

	"smsgw/otp"
)

// The hand-written envelope is byte for byte what encoding/json writes for
// it as a map (sorted members, HTML escaped, a newline after it).
func TestErrorBodyIsWhatEncodingJSONWrites(t *testing.T) {
	type widget struct {
		Provider string `json:"provider"`
		SiteKey  string `json:"site_key"`
	}
	tests := []struct {
		name string
		err  *otp.Error
	}{
		{"plain", otp.Errorf(otp.EInvalidRequest, "phone is required")},
		{"rate limited", otp.RateLimitedError(otp.Decision{Tightest: otp.Window{Scope: "phone", Rule: otp.Rule{Window: 60e9, Max: 1}}, RetryAfter: 42e9})},
		{"escaped message", otp.Errorf(otp.EInvalidPhone, "a \"quoted\" <b>bold</b> & \\ \u2028 é \x01 message")},
		{"fields of every kind", &otp.Error{Code: otp.EChallengeRequired, Message: "solve it",
			Fields: map[string]any{"challenge": widget{"turnstile", "0x4AAA<>"}, "scope": "range", "rule": "range_100", "limit": int64(7), "attempts_left": 2}}},
		{"fields named like the envelope's", &otp.Error{Code: otp.ERateLimited, Message: "m", RetryAfter: 3,
			Fields: map[string]any{"code": "shadowed", "retry_after": 99, "zeta": "last", "alpha": "first"}}},
		{"retry_after as a field of another code", &otp.Error{Code: otp.EPhoneNotAllowed, Message: "m",
			Fields: map[string]any{"retry_after": 5}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := tt.err
			inner := map[string]any{}
			for k, v := range e.Fields {
				inner[k] = v
			}
			inner["code"], inner["message"] = e.Code, e.Message
			if e.Code == otp.ERateLimited {
				inner["retry_after"] = e.RetryAfter
			}
			var want bytes.Buffer
			if err := json.NewEncoder(&want).Encode(map[string]any{"error": inner}); err != nil {
				t.Fatal(err)
			}
			if got := errorBody(e); !bytes.Equal(got, want.Bytes()) {
				t.Errorf("errorBody:\n got %s\nwant %s", got, want.Bytes())
			}
		})
	}
}
