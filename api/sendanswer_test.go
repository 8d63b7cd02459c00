package api

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

func encoderSendResponse(t testing.TB, r sendResponse) []byte {
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(r); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestSendResponseIsTheEncoders: appendSendResponse writes what
// encoding/json's Encoder writes for the same answer.
func TestSendResponseIsTheEncoders(t *testing.T) {
	for _, r := range []sendResponse{
		{ID: "0192f0c4-6a5e-7d1c-9b7a-3c2d1e0f4a5b", VerificationID: "ver_01JDX0Z6Q2", Phone: "+14155552671", Status: "pending", ExpiresIn: 300},
		{},
		{ID: `a"b\c`, VerificationID: "<x>&y", Phone: "\u2028\u2029\x00\x1f\x7f", Status: "\xff\xfeé", ExpiresIn: -1},
		{ExpiresIn: math.MaxInt64},
		{ExpiresIn: math.MinInt64},
	} {
		if got, want := appendSendResponse(nil, r), encoderSendResponse(t, r); !bytes.Equal(got, want) {
			t.Errorf("%+v:\n got %q\nwant %q", r, got, want)
		}
	}
	// Random strings over the bytes that matter (controls, quotes, HTML,
	// invalid UTF-8, U+2028) and plain ASCII.
	rng := rand.New(rand.NewPCG(34, 202))
	alphabet := []string{"a", "Z", "0", "+", "-", "_", " ", "~", "\"", "\\", "<", ">", "&", "\x00", "\x1f", "\x7f",
		"\x80", "\xff", "é", "\u2028", "\u2029", "😀", "\ufffd"}
	str := func() string {
		var b strings.Builder
		for i := rng.IntN(12); i > 0; i-- {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	for i := 0; i < 20000; i++ {
		r := sendResponse{ID: str(), VerificationID: str(), Phone: str(), Status: str(), ExpiresIn: rng.Int64() - rng.Int64()}
		if got, want := appendSendResponse(nil, r), encoderSendResponse(t, r); !bytes.Equal(got, want) {
			t.Fatalf("%+v:\n got %q\nwant %q", r, got, want)
		}
	}
}

func FuzzSendResponse(f *testing.F) {
	f.Add("0192f0c4-6a5e-7d1c-9b7a-3c2d1e0f4a5b", "ver_1", "+14155552671", "pending", int64(300))
	f.Add("<", "\u2028", "\xff", `"\`, int64(-7))
	f.Fuzz(func(t *testing.T, id, ver, phone, status string, expires int64) {
		r := sendResponse{ID: id, VerificationID: ver, Phone: phone, Status: status, ExpiresIn: expires}
		if got, want := appendSendResponse(nil, r), encoderSendResponse(t, r); !bytes.Equal(got, want) {
			t.Fatalf("%+v:\n got %q\nwant %q", r, got, want)
		}
	})
}

// TestAnswerAcceptedIsCJSONs: the 202 answerAccepted writes is c.JSON's,
// headers and body, with and without a query, with ?pretty and in debug
// mode.
func TestAnswerAcceptedIsCJSONs(t *testing.T) {
	r := sendResponse{ID: "0192f0c4-6a5e-7d1c-9b7a-3c2d1e0f4a5b", VerificationID: "ver_1", Phone: "+14155552671", Status: "pending", ExpiresIn: 300}
	for _, debug := range []bool{false, true} {
		for _, target := range []string{"/v1/otp/send", "/v1/otp/send?a=b", "/v1/otp/send?pretty", "/v1/otp/send?pretty=1&x"} {
			e := echo.New()
			e.Debug = debug
			answer := func(f func(echo.Context) error) *httptest.ResponseRecorder {
				w := httptest.NewRecorder()
				if err := f(e.NewContext(httptest.NewRequest(http.MethodPost, target, nil), w)); err != nil {
					t.Fatal(err)
				}
				return w
			}
			got := answer(func(c echo.Context) error { return answerAccepted(c, r) })
			want := answer(func(c echo.Context) error { return c.JSON(http.StatusAccepted, r) })
			if got.Code != want.Code || !reflect.DeepEqual(got.Header(), want.Header()) || got.Body.String() != want.Body.String() {
				t.Errorf("%s, debug %v: %d %v %q, c.JSON %d %v %q", target, debug, got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
			}
		}
	}
}

// BenchmarkSendAnswer: a 202's body by encoding/json's Encoder (what
// c.JSON does) and by appendSendResponse.
func BenchmarkSendAnswer(b *testing.B) {
	r := sendResponse{ID: "0192f0c4-6a5e-7d1c-9b7a-3c2d1e0f4a5b", VerificationID: "ver_01JDX0Z6Q2ZC8W3V", Phone: "+14155552671", Status: "pending", ExpiresIn: 300}
	b.Run("encoder", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var w bytes.Buffer
			_ = json.NewEncoder(&w).Encode(r)
		}
	})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = appendSendResponse(make([]byte, 0, 160), r)
		}
	})
}
