package api

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"smsgw/otp"
)

// FuzzDecodeSend: any body decodes or fails with invalid_request, never
// panics, and what decodes round-trips through JSON.
func FuzzDecodeSend(f *testing.F) {
	for _, s := range []string{
		`{"phone": "+14155552671"}`, `{"phone": 1}`, `[]`, `null`, `{"phone": "x", "region": "US", "locale": "en"}`,
		`{"phone": "\u0000"}`, `{"phone": "+1"}{}`, `{"PHONE": "+1"}`, `{"phone": "+1", "phone": "+2"}`, "\xff", `{"a":{"b":{"c":[[[[]]]]}}}`,
		`{"phone": "+1", "app_hash": "FA+9qCX9VSu"}`, `{"phone": "+1", "app_hash": "FA+9qCX9VS="}`, `{"phone": "+1", "app_hash": 11}`,
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
		} else if err == nil && req.AppHash != "" && !otp.ValidAppHash(req.AppHash) {
			t.Fatalf("app_hash %q passed validation", req.AppHash)
		}
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		var again sendRequest
		if err := decodeBody(b, &again); err != nil || !reflect.DeepEqual(again, req) {
			t.Fatalf("round trip of %q: %+v %v", body, again, err)
		}
	})
}

// FuzzDecodeVerify: any verify body decodes or fails with invalid_request;
// what decodes and validates has a code the domain either normalizes to
// digits or refuses as invalid_request.
func FuzzDecodeVerify(f *testing.F) {
	for _, s := range []string{
		`{"phone": "+14155552671", "code": "123456"}`, `{"phone": "+1", "code": 123456}`, `{"code": "12 34-56"}`,
		`{"phone": "x", "code": "\u0661\u0662"}`, `{"phone": "x", "code": null}`, `{"phone": "x", "code": "` + "\xff" + `"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req verifyRequest
		if err := decodeBody(body, &req); err != nil {
			if code := otp.ErrorCode(err); code != otp.EInvalidRequest {
				t.Fatalf("code %s for %q", code, body)
			}
			return
		}
		if err := req.validate(); err != nil {
			if otp.ErrorCode(err) != otp.EInvalidRequest {
				t.Fatalf("validate code %s", otp.ErrorCode(err))
			}
			return
		}
		digits, err := otp.NormalizeCode(req.Code)
		if err != nil {
			if otp.ErrorCode(err) != otp.EInvalidRequest {
				t.Fatalf("normalize code %s", otp.ErrorCode(err))
			}
			return
		}
		if digits == "" || strings.Trim(digits, "0123456789") != "" {
			t.Fatalf("code %q normalized to %q", req.Code, digits)
		}
	})
}
