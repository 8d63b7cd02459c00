package api

import (
	"encoding/json"
	"testing"

	"smsgw/otp"
)

// FuzzDecodeSend: any body decodes or fails with invalid_request, never
// panics, and what decodes round-trips through JSON.
func FuzzDecodeSend(f *testing.F) {
	for _, s := range []string{
		`{"phone": "+14155552671"}`, `{"phone": 1}`, `[]`, `null`, `{"phone": "x", "region": "US", "locale": "en"}`,
		`{"phone": "\u0000"}`, `{"phone": "+1"}{}`, `{"PHONE": "+1"}`, `{"phone": "+1", "phone": "+2"}`, "\xff", `{"a":{"b":{"c":[[[[]]]]}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req sendRequest
		err := decodeBody(body, &req)
		if err != nil {
			if code := otp.ErrorCode(err); code != otp.EInvalidRequest {
				t.Fatalf("code %s for %q", code, body)
			}
			return
		}
		if err := req.validate(); err != nil && otp.ErrorCode(err) != otp.EInvalidRequest {
			t.Fatalf("validate code %s", otp.ErrorCode(err))
		}
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		var again sendRequest
		if err := decodeBody(b, &again); err != nil || again != req {
			t.Fatalf("round trip of %q: %+v %v", body, again, err)
		}
	})
}
