package otp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/internal/testenv"
	"smsgw/otp"
	"smsgw/ratelimit"
	"smsgw/sender"
	"smsgw/sender/fake"
)

var defaultCfg = otp.Config{
	DefaultRegion: "US",
	IPv6Prefix:    64,
	IPRules:       []otp.Rule{{Window: time.Minute, Max: 5}, {Window: 10 * time.Minute, Max: 30}, {Window: time.Hour, Max: 50}},
	PhoneRules:    []otp.Rule{{Window: time.Minute, Max: 1}, {Window: 10 * time.Minute, Max: 5}, {Window: time.Hour, Max: 10}},
	CodeLength:    6,
	CodeTTL:       10 * time.Minute,
	SendTimeout:   time.Second,
}

func newService(t *testing.T, providers ...sender.Named) (*otp.Service, *fake.Provider) {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	box := fake.New(100, []string{"+1201"}, nil)
	if len(providers) == 0 {
		providers = []sender.Named{{Name: "fake", Provider: box}}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	return otp.NewService(defaultCfg, ratelimit.New(rdb, prefix), sender.NewRouter(providers...), log), box
}

var ticketN atomic.Int64

func req(phone, ip string) otp.SendRequest {
	return otp.SendRequest{
		Ticket:   fmt.Sprintf("svc-test-%d", ticketN.Add(1)),
		Phone:    phone,
		ClientIP: netip.MustParseAddr(ip),
	}
}

func TestSendTextsACode(t *testing.T) {
	svc, box := newService(t)
	res, err := svc.Send(context.Background(), req("(415) 555-2671", "198.51.100.7"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Phone.E164 != "+14155552671" || res.Receipt.Provider != "fake" || res.Receipt.MessageID == "" || res.ExpiresIn != 10*time.Minute {
		t.Fatalf("result %+v", res)
	}
	if !res.Decision.Allowed || res.Decision.Tightest.Policy() != "phone-1m" {
		t.Fatalf("decision %+v", res.Decision)
	}
	msgs := box.Messages("+14155552671")
	if len(msgs) != 1 || !regexp.MustCompile(`^Your verification code is \d{6}$`).MatchString(msgs[0].Body) {
		t.Fatalf("outbox %+v", msgs)
	}
}

func TestSendRefusals(t *testing.T) {
	svc, box := newService(t)
	ctx := context.Background()
	if _, err := svc.Send(ctx, req("+14155552671", "198.51.100.8")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		r      otp.SendRequest
		code   string
		reason string
	}{
		{"not a number", req("hello", "198.51.100.8"), otp.EInvalidPhone, ""},
		{"same phone within a minute", req("+1 415 555 2671", "198.51.100.9"), otp.ERateLimited, "phone:1m"},
		{"provider refuses", req("+1 201 555 0123", "198.51.100.8"), otp.EProviderError, "refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := svc.Send(ctx, tt.r)
			if otp.ErrorCode(err) != tt.code {
				t.Fatalf("err = %v, want %s", err, tt.code)
			}
			if res.Reason != tt.reason {
				t.Fatalf("reason = %q, want %q", res.Reason, tt.reason)
			}
		})
	}
	if n := len(box.Messages("")); n != 1 {
		t.Fatalf("outbox holds %d texts, want only the first", n)
	}
}

func TestRateLimitedErrorCarriesTheContractFields(t *testing.T) {
	svc, _ := newService(t)
	ctx := context.Background()
	if _, err := svc.Send(ctx, req("+14155552671", "198.51.100.8")); err != nil {
		t.Fatal(err)
	}
	_, err := svc.Send(ctx, req("+14155552671", "198.51.100.8"))
	var e *otp.Error
	if !errors.As(err, &e) || e.Code != otp.ERateLimited {
		t.Fatalf("err = %v", err)
	}
	if e.Fields["scope"] != "phone" || e.Fields["window"] != "1m" || e.Fields["limit"] != 1 {
		t.Fatalf("fields %v", e.Fields)
	}
	if ra := e.Fields["retry_after"].(int64); ra < 59 || ra > 60 {
		t.Fatalf("retry_after = %d, want 59 or 60", ra)
	}
}

func TestRefusedTextGivesQuotaBack(t *testing.T) {
	svc, box := newService(t)
	ctx := context.Background()
	// +1201 is refused by the fake provider; each refusal must give the
	// phone's single per-minute send back, and the IP's too.
	for i := 0; i < 8; i++ {
		_, err := svc.Send(ctx, req("+1 201 555 0123", "198.51.100.20"))
		if otp.ErrorCode(err) != otp.EProviderError {
			t.Fatalf("attempt %d: %v, want provider_error (not rate_limited: refunds work)", i, err)
		}
	}
	if _, err := svc.Send(ctx, req("+14155552671", "198.51.100.20")); err != nil {
		t.Fatalf("the IP's quota was not given back: %v", err)
	}
	if n := len(box.Messages("")); n != 1 {
		t.Fatalf("outbox holds %d texts, want 1", n)
	}
}

// unsure is a provider whose request times out after it went out.
type unsure struct{ calls atomic.Int64 }

func (u *unsure) Send(context.Context, string, string) (string, error) {
	u.calls.Add(1)
	return "", &otp.SendError{NotSent: false, Reason: "timeout", Err: context.DeadlineExceeded}
}

func TestUnknownOutcomeKeepsQuotaAndDoesNotFailOver(t *testing.T) {
	u := &unsure{}
	box := fake.New(10, nil, nil)
	svc, _ := newService(t, sender.Named{Name: "unsure", Provider: u}, sender.Named{Name: "fake", Provider: box})
	ctx := context.Background()
	res, err := svc.Send(ctx, req("+14155552671", "198.51.100.30"))
	if otp.ErrorCode(err) != otp.EProviderError || res.Reason != "timeout" || res.Receipt.Provider != "unsure" {
		t.Fatalf("res %+v err %v", res, err)
	}
	if len(box.Messages("")) != 0 {
		t.Fatal("failed over after an unknown outcome: the person could get two texts")
	}
	if _, err := svc.Send(ctx, req("+14155552671", "198.51.100.31")); otp.ErrorCode(err) != otp.ERateLimited {
		t.Fatalf("second send: %v, want rate_limited (the quota stays used)", err)
	}
}

func TestRedisDownFailsClosed(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	defer rdb.Close()
	box := fake.New(10, nil, nil)
	svc := otp.NewService(defaultCfg, ratelimit.New(rdb, "x:"), sender.NewRouter(sender.Named{Name: "fake", Provider: box}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	_, err := svc.Send(context.Background(), req("+14155552671", "198.51.100.40"))
	if otp.ErrorCode(err) != otp.EUnavailable {
		t.Fatalf("err = %v, want unavailable", err)
	}
	if len(box.Messages("")) != 0 {
		t.Fatal("a text went out without a limit check")
	}
}

func TestIPv6ClientsCountPerPrefix(t *testing.T) {
	svc, _ := newService(t)
	ctx := context.Background()
	phones := []string{"+14155552671", "+14155552672", "+14155552673", "+14155552674", "+14155552675", "+14155552676"}
	addrs := []string{"2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:ffff::9", "2001:db8:1:2::4", "2001:db8:1:2::5"}
	for i, a := range addrs {
		if _, err := svc.Send(ctx, req(phones[i], a)); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if _, err := svc.Send(ctx, req(phones[5], "2001:db8:1:2:abcd::1")); otp.ErrorCode(err) != otp.ERateLimited {
		t.Fatalf("sixth send from the same /64: %v, want rate_limited", err)
	}
	if _, err := svc.Send(ctx, req(phones[5], "2001:db8:1:3::1")); err != nil {
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
