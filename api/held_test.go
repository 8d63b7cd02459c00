package api

import (
	"bytes"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"smsgw/otp"
)

func refusal(now time.Time, wait time.Duration, tight otp.Window) otp.Decision {
	tight.Reset = wait
	return otp.Decision{Now: now, Tightest: tight, RetryAfter: wait, Policies: []otp.Window{
		{Scope: "phone", Rule: otp.Rule{Window: time.Minute, Max: 1}},
		{Scope: "phone", Rule: otp.Rule{Window: time.Hour, Max: 10}},
		{Scope: "ip", Rule: otp.Rule{Window: time.Minute, Max: 5}},
		{Scope: otp.KeyScope, Name: "account", Rule: otp.Rule{Window: time.Hour, Max: 20}},
	}}
}

// answerNormally is a limiter refusal's answer as the handler wrote it
// before the held answers: limit headers, then the error through
// answerError.
func answerNormally(s *Server, d otp.Decision) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	c := echo.New().NewContext(httptest.NewRequest(http.MethodPost, "/v1/otp/send", nil), w)
	setLimitHeaders(c.Response().Header(), d)
	s.answerError(otp.RateLimitedError(d), c)
	return w
}

func answerHeld(s *Server, d otp.Decision) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	c := echo.New().NewContext(httptest.NewRequest(http.MethodPost, "/v1/otp/send", nil), w)
	if err := s.answerHeld(c, s.heldAnswers.answer(d)); err != nil {
		panic(err)
	}
	return w
}

// A held answer is byte for byte the answer the refusal's error gets,
// built afresh or remembered, and a refusal that differs in anything its
// answer shows gets its own.
func TestHeldAnswerIsTheRefusalsAnswer(t *testing.T) {
	s := &Server{log: slog.New(slog.DiscardHandler), heldAnswers: newHeldAnswers()}
	now := time.Unix(1_795_765_600, 250_000_000)
	phone := otp.Window{Scope: "phone", Rule: otp.Rule{Window: time.Minute, Max: 1}, Used: 1}
	key := otp.Window{Scope: otp.KeyScope, Name: "account", Rule: otp.Rule{Window: time.Hour, Max: 20}, Used: 20}
	decisions := []otp.Decision{
		refusal(now, 42*time.Second+time.Millisecond, phone),
		refusal(now, 42*time.Second+time.Millisecond, phone), // remembered
		refusal(now.Add(10*time.Millisecond), 42*time.Second-9*time.Millisecond, phone),
		refusal(now.Add(time.Second), 41*time.Second, phone), // a second later
		refusal(now, 42*time.Second, key),
		refusal(now, 3599*time.Second+time.Nanosecond, key),
	}
	other := refusal(now, 42*time.Second+time.Millisecond, phone)
	other.Policies = other.Policies[:2]
	later := refusal(now, 42*time.Second+time.Millisecond, phone)
	later.Tightest.Reset += 2 * time.Second // the window's reset apart from the wait
	decisions = append(decisions, other, later)
	for i, d := range decisions {
		for round := range 2 {
			want, got := answerNormally(s, d), answerHeld(s, d)
			if got.Code != want.Code || !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) ||
				!maps.EqualFunc(got.Header(), want.Header(), slices.Equal) {
				t.Fatalf("decision %d, round %d:\nheld   %d %v %s\nnormal %d %v %s", i, round,
					got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
			}
		}
	}
	if a, b := s.heldAnswers.answer(decisions[0]), s.heldAnswers.answer(decisions[1]); a != b {
		t.Fatal("the same refusal's answer was built twice")
	}
}

// Only a body whose decoding is all of its shape is remembered, and only
// the same bytes find it.
func TestHeldRequests(t *testing.T) {
	h := newHeldRequests()
	body := []byte(`{"phone":"+16502530000"}`)
	req := sendRequest{Phone: "+16502530000"}
	if !h.cacheable(body, &req) {
		t.Fatal("a plain body is not cacheable")
	}
	for _, r := range []sendRequest{{Phone: "1", ClientIP: "203.0.113.7"}, {Phone: "1", LimitKeys: map[string]string{"a": "b"}}} {
		if h.cacheable(body, &r) {
			t.Fatalf("%+v is cacheable", r)
		}
	}
	if h.cacheable(bytes.Repeat([]byte(" "), heldBodyMax+1), &req) {
		t.Fatal("a long body is cacheable")
	}
	if _, ok := h.lookup(body); ok {
		t.Fatal("found before it was kept")
	}
	h.keep(body, req)
	if got, ok := h.lookup(body); !ok || got.Phone != req.Phone {
		t.Fatalf("lookup = %+v, %v", got, ok)
	}
	for _, b := range []string{`{"phone":"+16502530001"}`, `{"phone": "+16502530000"}`, `{"phone":"+16502530000"} `} {
		if got, ok := h.lookup([]byte(b)); ok {
			t.Fatalf("%s found %+v", b, got)
		}
	}
}
