package apptest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"smsgw/internal/app"
	"smsgw/internal/app/apptest"
	"smsgw/otp"
	"smsgw/pumping"
)

// pumpingService is a test service with the shipped pumping rules.
func pumpingService(t *testing.T, edit func(*pumping.Config), o apptest.Options) apptest.Service {
	t.Helper()
	cfg := pumping.DefaultConfig()
	if edit != nil {
		edit(&cfg)
	}
	o.Pumping = &cfg
	if o.Config == nil {
		o.Config = func(c *app.Config) {
			c.TestNumbers = []otp.TestNumber{{Phone: "+14155550100", Code: "246810"}}
		}
	}
	return apptest.New(t, o)
}

func errCode(err error) string { return otp.ErrorCode(err) }

func TestPumpingFlow(t *testing.T) {
	ctx := context.Background()
	t.Run("a held range is refused, its windows given back", func(t *testing.T) {
		s := pumpingService(t, nil, apptest.Options{})
		for i := 0; i < 2; i++ {
			mustSend(t, s, fmt.Sprintf("+4474001000%02d", i), fmt.Sprintf("198.51.100.%d", i))
		}
		res, err := s.Send(ctx, sendReq("+447400100050", "198.51.100.77"))
		var e *otp.Error
		if !errors.As(err, &e) || e.Code != otp.ERateLimited || e.Fields["scope"] != "range" || e.Fields["rule"] != "range_100" {
			t.Fatalf("third number of a block: %v", err)
		}
		if res.Reason != "pumping:range_100" {
			t.Fatalf("audit reason %q", res.Reason)
		}
		// The refused send gave its IP window back: five more sends from
		// 198.51.100.77 to other ranges pass the IP's 1-minute window of 5.
		for i := 0; i < 5; i++ {
			if _, err := s.Send(ctx, sendReq(fmt.Sprintf("+4474%d0%06d", 1+i, i), "198.51.100.77")); err != nil {
				t.Fatalf("send %d from the refused address: %v", i, err)
			}
		}
	})
	t.Run("shadow mode texts and says what it would refuse", func(t *testing.T) {
		s := pumpingService(t, func(c *pumping.Config) { c.Mode = pumping.ModeShadow }, apptest.Options{})
		var last otp.SendResult
		for i := 0; i < 4; i++ {
			res, err := s.Send(ctx, sendReq(fmt.Sprintf("+4474001000%02d", i), fmt.Sprintf("198.51.100.%d", i)))
			if err != nil {
				t.Fatalf("shadow mode refused: %v", err)
			}
			last = res
		}
		if last.Reason != "shadow:pumping:range_100" {
			t.Fatalf("reason %q", last.Reason)
		}
	})
	t.Run("overrides", func(t *testing.T) {
		s := pumpingService(t, nil, apptest.Options{})
		exp := time.Now().Add(time.Hour)
		for _, o := range []otp.Override{
			{Target: "+4474001000", Action: otp.OverrideAllow, ExpiresAt: exp},
			{Target: "+44740020", Action: otp.OverrideBlock, ExpiresAt: exp},
		} {
			if err := s.Guard.SetOverride(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < 4; i++ {
			res, err := s.Send(ctx, sendReq(fmt.Sprintf("+4474001000%02d", i), fmt.Sprintf("198.51.100.%d", i)))
			if err != nil || res.Reason != "override:allow" {
				t.Fatalf("allowed range, send %d: %q %v", i, res.Reason, err)
			}
		}
		if _, err := s.Send(ctx, sendReq("+447400200001", "198.51.100.9")); errCode(err) != otp.EPhoneNotAllowed {
			t.Fatalf("blocked range: %v", err)
		}
	})
	t.Run("test numbers are never texted and consume nothing", func(t *testing.T) {
		s := pumpingService(t, nil, apptest.Options{})
		for i := 0; i < 8; i++ {
			if _, err := s.Send(ctx, sendReq("(415) 555-0100", "198.51.100.1")); err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
		}
		if n := len(s.Outbox.Messages("+14155550100")); n != 0 {
			t.Fatalf("%d texts to a test number", n)
		}
		if _, err := s.Verify(ctx, verifyReq("+14155550100", "000000", "198.51.100.1")); errCode(err) != otp.EInvalidCode {
			t.Fatalf("wrong code: %v", err)
		}
		if _, err := s.Verify(ctx, verifyReq("+14155550100", "246810", "198.51.100.1")); err != nil {
			t.Fatalf("fixed code: %v", err)
		}
	})
	t.Run("a refused text releases its pumping count", func(t *testing.T) {
		s := pumpingService(t, nil, apptest.Options{})
		for i := 0; i < 4; i++ { // the fake provider refuses +1201...
			if _, err := s.Send(ctx, sendReq(fmt.Sprintf("+12015550%03d", i), fmt.Sprintf("198.51.100.%d", i))); errCode(err) != otp.EProviderError {
				t.Fatalf("send %d: %v", i, err)
			}
		}
		if _, err := s.Send(ctx, sendReq("+12015550100", "198.51.100.50")); errCode(err) != otp.EProviderError {
			t.Fatalf("the block was counted for texts never sent: %v", err)
		}
	})
	t.Run("approvals earn the range room", func(t *testing.T) {
		s := pumpingService(t, nil, apptest.Options{})
		for i := 0; i < 6; i++ {
			phone := fmt.Sprintf("+4474001000%02d", i)
			if _, err := s.Send(ctx, sendReq(phone, fmt.Sprintf("198.51.100.%d", i))); err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
			if _, err := s.Verify(ctx, verifyReq(phone, lastCode(t, s.Outbox, phone), fmt.Sprintf("198.51.100.%d", i))); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestChallengeInsteadOfRefusal(t *testing.T) {
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		fmt.Fprintf(w, `{"success": %v}`, r.PostForm.Get("response") == "human")
	}))
	t.Cleanup(vendor.Close)
	s := pumpingService(t, nil, apptest.Options{ChallengeSecret: "secret-key", Config: func(c *app.Config) {
		ch := &c.Pumping.Challenge
		ch.Provider, ch.SiteKey, ch.VerifyURL, ch.Timeout.Duration = "hcaptcha", "site", vendor.URL, 5*time.Second
	}})
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		mustSend(t, s, fmt.Sprintf("+4474001000%02d", i), fmt.Sprintf("198.51.100.%d", i))
	}
	req := sendReq("+447400100050", "198.51.100.60")
	res, err := s.Send(ctx, req)
	var e *otp.Error
	if !errors.As(err, &e) || e.Code != otp.EChallengeRequired || e.Fields["challenge"] != (otp.ChallengeWidget{Provider: "hcaptcha", SiteKey: "site"}) {
		t.Fatalf("without a token: %v", err)
	}
	if res.Reason != "challenge_required:pumping:range_100" {
		t.Fatalf("reason %q", res.Reason)
	}
	req = sendReq("+447400100051", "198.51.100.61")
	req.ChallengeToken = "bot"
	if _, err := s.Send(ctx, req); errCode(err) != otp.EChallengeRequired {
		t.Fatalf("a rejected token: %v", err)
	}
	req = sendReq("+447400100052", "198.51.100.62")
	req.ChallengeToken = "human"
	res, err = s.Send(ctx, req)
	if err != nil || res.Reason != "challenge_passed" {
		t.Fatalf("a solved challenge: %q %v", res.Reason, err)
	}
}

func TestValidateTestNumbers(t *testing.T) {
	tests := []struct {
		name string
		list []otp.TestNumber
		want string
	}{
		{"fine", []otp.TestNumber{{Phone: "+14155550100", Code: "123456", Region: "US"}}, ""},
		{"not E.164", []otp.TestNumber{{Phone: "(415) 555-0100", Code: "123456"}}, "test_numbers[0].phone"},
		{"not a number", []otp.TestNumber{{Phone: "+1415", Code: "123456"}}, "test_numbers[0].phone"},
		{"another region", []otp.TestNumber{{Phone: "+447911123456", Code: "123456", Region: "GB"}}, "not of region"},
		{"twice", []otp.TestNumber{{Phone: "+14155550100", Code: "123456"}, {Phone: "+14155550100", Code: "654321"}}, "test_numbers[1].phone"},
		{"short code", []otp.TestNumber{{Phone: "+14155550100", Code: "1234"}}, "test_numbers[0].code"},
		{"letters", []otp.TestNumber{{Phone: "+14155550100", Code: "12345a"}}, "test_numbers[0].code"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := otp.ValidateTestNumbers(tt.list, 6)
			switch {
			case tt.want == "" && err != nil:
				t.Fatal(err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v; want an error with %q", err, tt.want)
			}
		})
	}
}
