package apptest_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"smsgw/internal/app"
	"smsgw/internal/app/apptest"
	"smsgw/internal/testenv"
	"smsgw/otp"
	"smsgw/sender"
	"smsgw/sender/fake"
)

var ticketN atomic.Int64

// windows are config entries for rules.
func windows(rules ...otp.Rule) []app.LimitRule {
	out := make([]app.LimitRule, len(rules))
	for i, r := range rules {
		out[i] = app.LimitRule{Window: app.Duration{Duration: r.Window}, Max: r.Max}
	}
	return out
}

func ticket() string { return fmt.Sprintf("svc-test-%d", ticketN.Add(1)) }

func sendReq(phone, ip string) otp.SendRequest {
	return otp.SendRequest{Ticket: ticket(), Phone: phone, ClientIP: netip.MustParseAddr(ip)}
}

// mustSend sends a code to phone for a client at ip, failing the test if
// it is not sent.
func mustSend(t *testing.T, s apptest.Service, phone, ip string) {
	t.Helper()
	if _, err := s.Send(context.Background(), sendReq(phone, ip)); err != nil {
		t.Fatalf("send to %s from %s: %v", phone, ip, err)
	}
}

func verifyReq(phone, code, ip string) otp.VerifyRequest {
	return otp.VerifyRequest{Ticket: ticket(), Phone: phone, Code: code, ClientIP: netip.MustParseAddr(ip)}
}

var codeRE = regexp.MustCompile(`\b\d{6}\b`)

// lastCode reads the code of the newest text to phone from the fake outbox.
func lastCode(t *testing.T, box *fake.Provider, phone string) string {
	t.Helper()
	msgs := box.Messages(phone)
	if len(msgs) == 0 {
		t.Fatalf("no text to %s", phone)
	}
	code := codeRE.FindString(msgs[len(msgs)-1].Body)
	if code == "" {
		t.Fatalf("no code in %q", msgs[len(msgs)-1].Body)
	}
	return code
}

func TestSendTextsACode(t *testing.T) {
	s := apptest.New(t, apptest.Options{})
	res, err := s.Send(context.Background(), sendReq("(415) 555-2671", "198.51.100.7"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Phone.E164 != "+14155552671" || res.Receipt.Provider != "fake" || res.Receipt.MessageID == "" || res.ExpiresIn != 10*time.Minute || res.Reason != "" {
		t.Fatalf("result %+v", res)
	}
	if !res.Decision.Allowed || res.Decision.Tightest.Policy() != "phone-1m" {
		t.Fatalf("decision %+v", res.Decision)
	}
	msgs := s.Outbox.Messages("+14155552671")
	if len(msgs) != 1 || !regexp.MustCompile(`^Your verification code is \d{6}\. It expires in 10 minutes\.$`).MatchString(msgs[0].Body) {
		t.Fatalf("outbox %+v", msgs)
	}
}

func TestSendRefusals(t *testing.T) {
	s := apptest.New(t, apptest.Options{})
	ctx := context.Background()
	mustSend(t, s, "+14155552671", "198.51.100.8")
	tests := []struct {
		name   string
		r      otp.SendRequest
		code   string
		reason string
	}{
		{"not a number", sendReq("hello", "198.51.100.8"), otp.EInvalidPhone, ""},
		{"same phone within a minute", sendReq("+1 415 555 2671", "198.51.100.9"), otp.ERateLimited, "phone:1m"},
		{"provider refuses", sendReq("+1 201 555 0123", "198.51.100.8"), otp.EProviderError, "refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := s.Send(ctx, tt.r)
			if otp.ErrorCode(err) != tt.code {
				t.Fatalf("err = %v, want %s", err, tt.code)
			}
			if res.Reason != tt.reason {
				t.Fatalf("reason = %q, want %q", res.Reason, tt.reason)
			}
		})
	}
	if n := len(s.Outbox.Messages("")); n != 1 {
		t.Fatalf("outbox holds %d texts, want only the first", n)
	}
}

func TestRateLimitedErrorCarriesTheContractFields(t *testing.T) {
	s := apptest.New(t, apptest.Options{})
	ctx := context.Background()
	mustSend(t, s, "+14155552671", "198.51.100.8")
	_, err := s.Send(ctx, sendReq("+14155552671", "198.51.100.8"))
	var e *otp.Error
	if !errors.As(err, &e) || e.Code != otp.ERateLimited {
		t.Fatalf("err = %v", err)
	}
	if e.Fields["scope"] != "phone" || e.Fields["window"] != "1m" || e.Fields["limit"] != 1 {
		t.Fatalf("fields %v", e.Fields)
	}
	if ra := e.RetryAfter; ra < 59 || ra > 60 {
		t.Fatalf("retry_after = %d, want 59 or 60", ra)
	}
}

func TestRefusedTextGivesQuotaBackAndLeavesNoCode(t *testing.T) {
	s := apptest.New(t, apptest.Options{})
	ctx := context.Background()
	// +1201 is refused by the fake provider; each refusal must give the
	// phone's single per-minute send back, and the IP's too.
	for i := 0; i < 8; i++ {
		_, err := s.Send(ctx, sendReq("+1 201 555 0123", "198.51.100.20"))
		if otp.ErrorCode(err) != otp.EProviderError {
			t.Fatalf("attempt %d: %v, want provider_error (not rate_limited: refunds work)", i, err)
		}
	}
	if _, err := s.Verify(ctx, verifyReq("+12015550123", "000000", "198.51.100.20")); otp.ErrorCode(err) != otp.ENoPendingCode {
		t.Fatalf("verify after a refused text: %v, want no_pending_code", err)
	}
	if _, err := s.Send(ctx, sendReq("+14155552671", "198.51.100.20")); err != nil {
		t.Fatalf("the IP's quota was not given back: %v", err)
	}
}

// unsure is a provider whose request times out after it went out.
type unsure struct{}

func (unsure) Send(context.Context, string, string) (string, error) {
	return "", &otp.SendError{Failure: otp.OutcomeUnknown, Reason: "timeout", Err: context.DeadlineExceeded}
}

func TestUnknownOutcomeKeepsQuotaAndDoesNotFailOver(t *testing.T) {
	box := fake.New(10, nil, nil)
	s := apptest.New(t, apptest.Options{Providers: []sender.Named{{Name: "unsure", Provider: unsure{}}, {Name: "fake", Provider: box}}})
	ctx := context.Background()
	res, err := s.Send(ctx, sendReq("+14155552671", "198.51.100.30"))
	if otp.ErrorCode(err) != otp.EProviderError || res.Reason != "timeout" || res.Receipt.Provider != "unsure" {
		t.Fatalf("res %+v err %v", res, err)
	}
	if len(box.Messages("")) != 0 {
		t.Fatal("failed over after an unknown outcome: the person could get two texts")
	}
	if _, err := s.Send(ctx, sendReq("+14155552671", "198.51.100.31")); otp.ErrorCode(err) != otp.ERateLimited {
		t.Fatalf("second send: %v, want rate_limited (the quota stays used)", err)
	}
}

func TestRedisDownFailsClosed(t *testing.T) {
	dead := testenv.DeadRedis(t)
	s := apptest.New(t, apptest.Options{Redis: dead})
	if _, err := s.Send(context.Background(), sendReq("+14155552671", "198.51.100.40")); otp.ErrorCode(err) != otp.EUnavailable {
		t.Fatalf("send: %v, want unavailable", err)
	}
	if len(s.Outbox.Messages("")) != 0 {
		t.Fatal("a text went out without a limit check")
	}
	if _, err := s.Verify(context.Background(), verifyReq("+14155552671", "123456", "198.51.100.40")); otp.ErrorCode(err) != otp.EUnavailable {
		t.Fatalf("verify: %v, want unavailable", err)
	}
}

func TestIPv6ClientsCountPerPrefix(t *testing.T) {
	s := apptest.New(t, apptest.Options{})
	ctx := context.Background()
	phones := []string{"+14155552671", "+14155552672", "+14155552673", "+14155552674", "+14155552675", "+14155552676"}
	addrs := []string{"2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:ffff::9", "2001:db8:1:2::4", "2001:db8:1:2::5"}
	for i, a := range addrs {
		if _, err := s.Send(ctx, sendReq(phones[i], a)); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if _, err := s.Send(ctx, sendReq(phones[5], "2001:db8:1:2:abcd::1")); otp.ErrorCode(err) != otp.ERateLimited {
		t.Fatalf("sixth send from the same /64: %v, want rate_limited", err)
	}
	if _, err := s.Send(ctx, sendReq(phones[5], "2001:db8:1:3::1")); err != nil {
		t.Fatalf("another /64 is another client: %v", err)
	}
}

func TestIPKey(t *testing.T) {
	for _, tt := range []struct {
		addr   string
		prefix int
		want   string
	}{
		{"203.0.113.7", 64, "203.0.113.7"},
		{"::ffff:203.0.113.7", 64, "203.0.113.7"},
		{"2001:db8:1:2:3:4:5:6", 64, "2001:db8:1:2::/64"},
		{"2001:db8:1:2:3:4:5:6", 48, "2001:db8:1::/48"},
		{"2001:db8:1:2:3:4:5:6", 128, "2001:db8:1:2:3:4:5:6"},
		{"fe80::1%eth0", 64, "fe80::/64"},
	} {
		t.Run(tt.addr, func(t *testing.T) {
			if got := otp.IPKey(netip.MustParseAddr(tt.addr), tt.prefix); got != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// TestVerify walks every row of the SPEC's verify table.
func TestVerify(t *testing.T) {
	const phone, ip = "+14155552671", "198.51.100.50"
	type step struct {
		code       string // "" sends a code; "right" is the texted code
		err        string
		left       int
		reason     string
		phoneInput string
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"right code is approved once", []step{
			{code: ""},
			{code: "right", reason: ""},
			{code: "right", err: otp.ENoPendingCode},
		}},
		{"wrong codes count down, then the code is gone", []step{
			{code: ""},
			{code: "wrong", err: otp.EInvalidCode, left: 4, reason: "attempts_left:4"},
			{code: "wrong", err: otp.EInvalidCode, left: 3},
			{code: "wrong", err: otp.EInvalidCode, left: 2},
			{code: "wrong", err: otp.EInvalidCode, left: 1},
			{code: "wrong", err: otp.EInvalidCode, left: 0, reason: "locked_out"},
			{code: "right", err: otp.ENoPendingCode},
		}},
		{"a wrong code then the right one", []step{
			{code: ""},
			{code: "wrong", err: otp.EInvalidCode, left: 4},
			{code: "right"},
		}},
		{"never sent", []step{{code: "123456", err: otp.ENoPendingCode}}},
		{"code typed with spaces and dashes", []step{{code: ""}, {code: "spaced"}}},
		{"code with letters is not a code", []step{{code: ""}, {code: "12345a", err: otp.EInvalidRequest}, {code: "right"}}},
		{"any notation of the phone", []step{{code: ""}, {code: "right", phoneInput: "(415) 555-2671"}}},
		{"bad phone", []step{{code: "123456", err: otp.EInvalidPhone, phoneInput: "nope"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := apptest.New(t, apptest.Options{})
			ctx := context.Background()
			right := ""
			for i, st := range tt.steps {
				if st.code == "" {
					if _, err := s.Send(ctx, sendReq(phone, ip)); err != nil {
						t.Fatalf("step %d: send: %v", i, err)
					}
					right = lastCode(t, s.Outbox, phone)
					continue
				}
				guess := st.code
				switch guess {
				case "right":
					guess = right
				case "wrong":
					guess = wrongCode(right)
				case "spaced":
					guess = right[:3] + " - " + right[3:]
				}
				in := phone
				if st.phoneInput != "" {
					in = st.phoneInput
				}
				res, err := s.Verify(ctx, verifyReq(in, guess, ip))
				if otp.ErrorCode(err) != st.err && !(st.err == "" && err == nil) {
					t.Fatalf("step %d: err = %v, want %q", i, err, st.err)
				}
				if st.err == otp.EInvalidCode {
					var e *otp.Error
					errors.As(err, &e)
					if e.Fields["attempts_left"] != st.left || res.AttemptsLeft != st.left {
						t.Fatalf("step %d: attempts_left = %v, want %d", i, e.Fields["attempts_left"], st.left)
					}
				}
				if st.reason != "" && res.Reason != st.reason {
					t.Fatalf("step %d: reason = %q, want %q", i, res.Reason, st.reason)
				}
				if st.err == "" && res.Phone.E164 != phone {
					t.Fatalf("step %d: phone %q", i, res.Phone.E164)
				}
			}
		})
	}
}

func wrongCode(right string) string {
	b := []byte(right)
	b[0] = '0' + (b[0]-'0'+1)%10
	return string(b)
}

func TestResendKeepsCodeAndAttempts(t *testing.T) {
	s := apptest.New(t, apptest.Options{Config: func(c *app.Config) {
		c.Limits.Phone = windows(otp.Rule{Window: time.Minute, Max: 10})
		c.OTP.TTL.Duration = 2 * time.Second
	}})
	ctx := context.Background()
	const phone = "+14155552671"
	if _, err := s.Send(ctx, sendReq(phone, "198.51.100.60")); err != nil {
		t.Fatal(err)
	}
	first := lastCode(t, s.Outbox, phone)
	for i := 0; i < 2; i++ {
		if _, err := s.Verify(ctx, verifyReq(phone, wrongCode(first), "198.51.100.60")); otp.ErrorCode(err) != otp.EInvalidCode {
			t.Fatal(err)
		}
	}
	time.Sleep(1200 * time.Millisecond)
	res, err := s.Send(ctx, sendReq(phone, "198.51.100.60"))
	if err != nil || res.Reason != "resend" {
		t.Fatalf("resend: %+v %v", res, err)
	}
	if again := lastCode(t, s.Outbox, phone); again != first {
		t.Fatalf("resend texted %s, want the pending %s", again, first)
	}
	// The expiry was renewed: past the first send's 2s, the code still works...
	time.Sleep(1200 * time.Millisecond)
	// ...and the resend bought no guesses: 3 wrong ones left, not 5.
	_, err = s.Verify(ctx, verifyReq(phone, wrongCode(first), "198.51.100.60"))
	var e *otp.Error
	if !errors.As(err, &e) || e.Fields["attempts_left"] != 2 {
		t.Fatalf("after resend: %v %v, want 2 attempts left", err, e)
	}
	if _, err := s.Verify(ctx, verifyReq(phone, first, "198.51.100.60")); err != nil {
		t.Fatalf("the first text's code after a resend: %v", err)
	}
}

func TestCodeExpires(t *testing.T) {
	s := apptest.New(t, apptest.Options{Config: func(c *app.Config) { c.OTP.TTL.Duration = time.Second }})
	ctx := context.Background()
	const phone = "+14155552671"
	if _, err := s.Send(ctx, sendReq(phone, "198.51.100.70")); err != nil {
		t.Fatal(err)
	}
	code := lastCode(t, s.Outbox, phone)
	time.Sleep(1100 * time.Millisecond)
	if _, err := s.Verify(ctx, verifyReq(phone, code, "198.51.100.70")); otp.ErrorCode(err) != otp.ENoPendingCode {
		t.Fatalf("expired code: %v, want no_pending_code", err)
	}
}

// TestRacingWrongGuessesGetExactlyMaxAttempts: 100 wrong guesses at once
// (from many IPs, so the verify limit is not what stops them) are answered
// invalid_code exactly max_attempts times, and the right code afterwards
// finds nothing.
func TestRacingWrongGuessesGetExactlyMaxAttempts(t *testing.T) {
	s := apptest.New(t, apptest.Options{})
	ctx := context.Background()
	const phone = "+14155552671"
	if _, err := s.Send(ctx, sendReq(phone, "198.51.100.80")); err != nil {
		t.Fatal(err)
	}
	right := lastCode(t, s.Outbox, phone)
	got := testenv.Race(t, 100, func(i int) string {
		res, err := s.Verify(ctx, verifyReq(phone, fmt.Sprintf("%06d", (i*7919)%1000000), fmt.Sprintf("10.2.%d.%d", i/200, i%200)))
		switch otp.ErrorCode(err) {
		case otp.EInvalidCode:
			return fmt.Sprintf("invalid_code, %d left", res.AttemptsLeft)
		case otp.ENoPendingCode:
			return "no_pending_code"
		}
		if err == nil {
			t.Errorf("guess %d approved", i) // astronomically unlikely, and a bug if not a match
		} else {
			t.Error(err)
		}
		return "other"
	})
	// Five invalid_code answers, with attempts_left each of 4..0 exactly once.
	want := map[string]int{"no_pending_code": 95}
	for l := 0; l < 5; l++ {
		want[fmt.Sprintf("invalid_code, %d left", l)] = 1
	}
	if !maps.Equal(got, want) {
		t.Fatalf("answers %v; want %v", got, want)
	}
	if _, err := s.Verify(ctx, verifyReq(phone, right, "198.51.100.81")); otp.ErrorCode(err) != otp.ENoPendingCode {
		t.Fatalf("right code after lockout: %v", err)
	}
}

func TestVerifyLimitPerIP(t *testing.T) {
	s := apptest.New(t, apptest.Options{Config: func(c *app.Config) {
		c.Limits.VerifyIP = windows(otp.Rule{Window: time.Minute, Max: 3})
	}})
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if _, err := s.Verify(ctx, verifyReq("+14155552671", "123456", "198.51.100.90")); otp.ErrorCode(err) != otp.ENoPendingCode {
			t.Fatal(err)
		}
	}
	res, err := s.Verify(ctx, verifyReq("+14155552672", "123456", "198.51.100.90"))
	var e *otp.Error
	if !errors.As(err, &e) || e.Code != otp.ERateLimited || e.Fields["scope"] != "ip" || res.Reason != "ip:1m" {
		t.Fatalf("fourth verify: %v %+v", err, res)
	}
	// Sends from the IP have their own budget.
	if _, err := s.Send(ctx, sendReq("+14155552671", "198.51.100.90")); err != nil {
		t.Fatal(err)
	}
}

// TestNoCodeInClear sends, resends and verifies, then scans every Redis key
// and value the service wrote for the code, in its digits and in the text.
func TestNoCodeInClear(t *testing.T) {
	s := apptest.New(t, apptest.Options{Config: func(c *app.Config) { c.Limits.Phone, c.Limits.IP = nil, nil }})
	ctx := context.Background()
	var codes []string
	for i := 0; i < 5; i++ {
		phone := fmt.Sprintf("+1415555267%d", i)
		if _, err := s.Send(ctx, sendReq(phone, "198.51.100.100")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Send(ctx, sendReq(phone, "198.51.100.100")); err != nil { // resend
			t.Fatal(err)
		}
		code := lastCode(t, s.Outbox, phone)
		s.Verify(ctx, verifyReq(phone, wrongCode(code), "198.51.100.100"))
		codes = append(codes, code)
	}
	var dump strings.Builder
	keys, err := s.Redis.Keys(ctx, s.Prefix+"*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys %v %v", keys, err)
	}
	for _, k := range keys {
		dump.WriteString(k)
		switch s.Redis.Type(ctx, k).Val() {
		case "hash":
			for f, v := range s.Redis.HGetAll(ctx, k).Val() {
				dump.WriteString(f + "=" + v + ";")
			}
		case "zset":
			for _, m := range s.Redis.ZRange(ctx, k, 0, -1).Val() {
				dump.WriteString(m + ";")
			}
		default:
			t.Fatalf("unexpected key type for %s", k)
		}
	}
	for _, c := range codes {
		if strings.Contains(dump.String(), c) {
			t.Fatalf("code %s appears in Redis", c)
		}
	}
}

// TestRotatedSecretReplacesThePendingCode: after SMSGW_SECRET changes, a
// pending code can be neither opened nor matched; a resend texts a new code
// in its place and keeps the attempt count.
func TestRotatedSecretReplacesThePendingCode(t *testing.T) {
	before := apptest.New(t, apptest.Options{Config: func(c *app.Config) { c.Limits.Phone = nil }})
	ctx := context.Background()
	const phone = "+14155552671"
	if _, err := before.Send(ctx, sendReq(phone, "198.51.100.110")); err != nil {
		t.Fatal(err)
	}
	old := lastCode(t, before.Outbox, phone)
	before.Verify(ctx, verifyReq(phone, wrongCode(old), "198.51.100.110"))

	after := apptest.New(t, apptest.Options{Redis: before.Redis, Prefix: before.Prefix, Secret: strings.Repeat("r", 40),
		Config: func(c *app.Config) { c.Limits.Phone = nil }})
	if _, err := after.Send(ctx, sendReq(phone, "198.51.100.111")); err != nil {
		t.Fatal(err)
	}
	fresh := lastCode(t, after.Outbox, phone)
	if fresh == old {
		return // once in a million runs the new code is the old one: nothing to tell apart
	}
	if _, err := after.Verify(ctx, verifyReq(phone, old, "198.51.100.111")); otp.ErrorCode(err) != otp.EInvalidCode {
		t.Fatalf("old code under the new secret: %v", err)
	}
	res, err := after.Verify(ctx, verifyReq(phone, wrongCode(fresh), "198.51.100.111"))
	if res.AttemptsLeft != 2 {
		t.Fatalf("attempts left %d (%v), want 2: the count survives the replacement", res.AttemptsLeft, err)
	}
	if _, err := after.Verify(ctx, verifyReq(phone, fresh, "198.51.100.111")); err != nil {
		t.Fatalf("new code: %v", err)
	}
}

func TestIdempotentSends(t *testing.T) {
	s := apptest.New(t, apptest.Options{Config: func(c *app.Config) { c.Limits.Phone = nil }})
	ctx := context.Background()
	req := func(key, phone string) otp.SendRequest {
		r := sendReq(phone, "198.51.100.120")
		r.RequestID, r.IdempotencyKey = "req-"+r.Ticket, key
		return r
	}
	first, err := s.Send(ctx, req("k1", "+14155552671"))
	if err != nil || first.Replayed {
		t.Fatalf("first: %+v %v", first, err)
	}
	again, err := s.Send(ctx, req("k1", "+1 415 555 2671"))
	if err != nil || !again.Replayed || again.RequestID != first.RequestID || again.Receipt != first.Receipt ||
		again.Reason != "idempotent_replay" || again.Decision.Tightest != first.Decision.Tightest {
		t.Fatalf("replay: %+v %v\nfirst: %+v", again, err, first)
	}
	if n := len(s.Outbox.Messages("+14155552671")); n != 1 {
		t.Fatalf("%d texts, want 1", n)
	}
	// The key is per phone, and other keys are other requests.
	if r, err := s.Send(ctx, req("k1", "+14155552672")); err != nil || r.Replayed {
		t.Fatalf("same key, other phone: %+v %v", r, err)
	}
	if r, err := s.Send(ctx, req("k2", "+14155552671")); err != nil || r.Replayed {
		t.Fatalf("other key: %+v %v", r, err)
	}
	// A refused send is not remembered: the retry runs.
	if _, err := s.Send(ctx, req("k3", "+12015550123")); otp.ErrorCode(err) != otp.EProviderError {
		t.Fatal(err)
	}
	if r, err := s.Send(ctx, req("k3", "+12015550123")); otp.ErrorCode(err) != otp.EProviderError || r.Replayed {
		t.Fatalf("retry after a refusal: %+v %v", r, err)
	}
}

// TestRacingIdempotentSendsTextOnce: 50 requests with one key at once get one
// text and the same answer.
func TestRacingIdempotentSendsTextOnce(t *testing.T) {
	s := apptest.New(t, apptest.Options{Config: func(c *app.Config) { c.Limits.Phone, c.Limits.IP = nil, nil }})
	seen := testenv.Race(t, 50, func(i int) string {
		r := sendReq("+14155552671", "198.51.100.121")
		r.RequestID, r.IdempotencyKey = fmt.Sprintf("req-%d", i), "race"
		res, err := s.Send(context.Background(), r)
		if err != nil {
			t.Error(err)
			return "error"
		}
		return res.RequestID + "/" + res.Receipt.MessageID
	})
	if len(seen) != 1 {
		t.Fatalf("answers %v: want one answer for all", seen)
	}
	if n := len(s.Outbox.Messages("+14155552671")); n != 1 {
		t.Fatalf("%d texts, want 1", n)
	}
}

func TestPhonePolicy(t *testing.T) {
	tests := []struct {
		name   string
		policy otp.PhonePolicy
		phone  string
		reason string // "" when allowed
	}{
		{"mobile allowed by default types", otp.PhonePolicy{AllowedTypes: []string{"mobile", "fixed_line_or_mobile"}}, "+447400123456", ""},
		{"US numbers are fixed_line_or_mobile", otp.PhonePolicy{AllowedTypes: []string{"mobile", "fixed_line_or_mobile"}}, "+14155552671", ""},
		{"premium rate refused", otp.PhonePolicy{AllowedTypes: []string{"mobile", "fixed_line_or_mobile"}}, "+449061234567", "type:premium_rate"},
		{"toll free refused", otp.PhonePolicy{AllowedTypes: []string{"mobile", "fixed_line_or_mobile"}}, "+18005550199", "type:toll_free"},
		{"landline refused", otp.PhonePolicy{AllowedTypes: []string{"mobile", "fixed_line_or_mobile"}}, "+442079460000", "type:fixed_line"},
		{"no type policy", otp.PhonePolicy{}, "+442079460000", ""},
		{"allowed countries", otp.PhonePolicy{AllowedCountries: []string{"US", "CA"}}, "+447400123456", "country:GB"},
		{"allowed country", otp.PhonePolicy{AllowedCountries: []string{"US", "GB"}}, "+447400123456", ""},
		{"denied country", otp.PhonePolicy{DeniedCountries: []string{"GB"}}, "+447400123456", "country:GB"},
		{"denied wins", otp.PhonePolicy{AllowedCountries: []string{"GB"}, DeniedCountries: []string{"GB"}}, "+447400123456", "country:GB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := apptest.New(t, apptest.Options{Config: func(c *app.Config) {
				c.Phone.AllowedTypes, c.Phone.AllowedCountries, c.Phone.DeniedCountries = tt.policy.AllowedTypes, tt.policy.AllowedCountries, tt.policy.DeniedCountries
			}})
			ctx := context.Background()
			res, err := s.Send(ctx, sendReq(tt.phone, "198.51.100.130"))
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var e *otp.Error
			if !errors.As(err, &e) || e.Code != otp.EPhoneNotAllowed || e.Fields["reason"] != tt.reason || res.Reason != tt.reason {
				t.Fatalf("err %v %+v, want phone_not_allowed %s", err, e, tt.reason)
			}
			// Nothing was consumed: no limit or code key exists.
			if keys := s.Redis.Keys(ctx, s.Prefix+"*").Val(); len(keys) != 0 {
				t.Fatalf("a refused number wrote %v", keys)
			}
		})
	}
}

func TestCountryPrefixAndGlobalSubjects(t *testing.T) {
	tests := []struct {
		name   string
		config func(*app.Config)
		phones []string // each from its own IP; the last is refused
		scope  string
	}{
		{"country", func(c *app.Config) { c.Limits.Country = windows(otp.Rule{Window: time.Minute, Max: 2}) },
			[]string{"+447400123456", "+447400123457", "+447400123458"}, "country"},
		{"prefix", func(c *app.Config) {
			c.Limits.Prefix = []app.LimitRule{{Digits: 7, Window: app.Duration{Duration: time.Minute}, Max: 2}}
		}, []string{"+447400123456", "+447400199999", "+447400100000"}, "prefix"},
		{"global", func(c *app.Config) { c.Limits.Global = windows(otp.Rule{Window: time.Minute, Max: 2}) },
			[]string{"+447400123456", "+14155552671", "+4915123456789"}, "global"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := apptest.New(t, apptest.Options{Config: tt.config})
			ctx := context.Background()
			for i, p := range tt.phones {
				_, err := s.Send(ctx, sendReq(p, fmt.Sprintf("198.51.100.%d", 140+i)))
				last := i == len(tt.phones)-1
				if !last && err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
				if last {
					var e *otp.Error
					if !errors.As(err, &e) || e.Code != otp.ERateLimited || e.Fields["scope"] != tt.scope {
						t.Fatalf("last send: %v, want rate_limited scope %s", err, tt.scope)
					}
				}
			}
		})
	}
	// Another country and another range are other subjects.
	s := apptest.New(t, apptest.Options{Config: func(c *app.Config) {
		c.Limits.Country = windows(otp.Rule{Window: time.Minute, Max: 1})
		c.Limits.Prefix = []app.LimitRule{{Digits: 5, Window: app.Duration{Duration: time.Minute}, Max: 1}}
	}})
	for i, p := range []string{"+447400123456", "+14155552671", "+4915123456789"} {
		if _, err := s.Send(context.Background(), sendReq(p, fmt.Sprintf("198.51.100.%d", 150+i))); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
}

// Every window of a decision has its own RateLimit-Policy name, also when
// two subjects share a scope and a window length.
func TestPolicyNamesAreUnique(t *testing.T) {
	s := apptest.New(t, apptest.Options{Config: func(c *app.Config) {
		hour := app.Duration{Duration: time.Hour}
		c.Limits.Prefix = []app.LimitRule{{Digits: 5, Window: hour, Max: 50}, {Digits: 7, Window: hour, Max: 2}}
		c.Limits.Country = windows(otp.Rule{Window: time.Hour, Max: 1000})
		c.Limits.Global = windows(otp.Rule{Window: time.Hour, Max: 1000})
	}})
	ctx := context.Background()
	res, err := s.Send(ctx, sendReq("+447400123456", "198.51.100.160"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, w := range res.Decision.Policies {
		if seen[w.Policy()] {
			t.Fatalf("%q names two windows: %+v", w.Policy(), res.Decision.Policies)
		}
		seen[w.Policy()] = true
	}
	for _, want := range []string{"phone-1m", "ip-1h", "country-1h", "prefix5-1h", "prefix7-1h", "global-1h"} {
		if !seen[want] {
			t.Errorf("no window named %q in %v", want, seen)
		}
	}
	// The refusing window is named as RateLimit-Policy names it.
	s.Send(ctx, sendReq("+447400123457", "198.51.100.161"))
	res, err = s.Send(ctx, sendReq("+447400123458", "198.51.100.162"))
	if otp.ErrorCode(err) != otp.ERateLimited || res.Decision.Tightest.Policy() != "prefix7-1h" {
		t.Fatalf("third send in the range: %v, tightest %q", err, res.Decision.Tightest.Policy())
	}
}
