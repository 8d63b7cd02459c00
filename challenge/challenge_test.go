package challenge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"smsgw/otp"
)

// fakeVendor is a siteverify endpoint: tokens it knows pass (with a score if
// set); it records what it was asked.
type fakeVendor struct {
	mu     sync.Mutex
	asked  []string
	answer func(token string) (int, string)
}

func (f *fakeVendor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
		http.Error(w, "bad request", 400)
		return
	}
	if err := r.ParseForm(); err != nil || r.PostForm.Get("secret") != "s3cret-key" {
		w.Write([]byte(`{"success": false, "error-codes": ["invalid-input-secret"]}`))
		return
	}
	f.mu.Lock()
	f.asked = append(f.asked, r.PostForm.Get("response")+"@"+r.PostForm.Get("remoteip"))
	f.mu.Unlock()
	status, body := f.answer(r.PostForm.Get("response"))
	w.WriteHeader(status)
	w.Write([]byte(body))
}

func TestVerify(t *testing.T) {
	vendor := &fakeVendor{answer: func(token string) (int, string) {
		switch token {
		case "good":
			return 200, `{"success": true, "hostname": "example.com"}`
		case "good-v3":
			return 200, `{"success": true, "score": 0.9}`
		case "bot-v3":
			return 200, `{"success": true, "score": 0.1}`
		case "used":
			return 200, `{"success": false, "error-codes": ["timeout-or-duplicate"]}`
		case "hostile":
			return 200, `{"success": false, "error-codes": ["` + strings.Repeat("\\u0000x", 100) + `", "a", "b", "c", "d", "e"]}`
		case "down":
			return 503, `upstream unavailable`
		case "garbage":
			return 200, `<html>`
		}
		return 200, `{"success": false, "error-codes": ["invalid-input-response"]}`
	}}
	srv := httptest.NewServer(vendor)
	defer srv.Close()

	for _, provider := range []string{"turnstile", "hcaptcha", "recaptcha"} {
		t.Run(provider, func(t *testing.T) {
			cfg := Config{Provider: provider, SiteKey: "site", Secret: "s3cret-key", VerifyURL: srv.URL, MinScore: 0.5, Timeout: 10 * time.Second}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			v := New(cfg, nil, nil)
			if w := v.Widget(); w.Provider != provider || w.SiteKey != "site" {
				t.Fatalf("widget %+v", w)
			}
			tests := []struct {
				token    string
				rejected bool
				failed   bool
			}{
				{"good", false, false},
				{"good-v3", false, false},
				{"bot-v3", true, false},
				{"used", true, false},
				{"forged", true, false},
				{"hostile", true, false},
				{"", true, false},
				{strings.Repeat("x", maxToken+1), true, false},
				{"tok\x00en", true, false},
				{"down", false, true},
				{"garbage", false, true},
			}
			for _, tt := range tests {
				name := tt.token
				if len(name) > 20 {
					name = name[:20]
				}
				t.Run(name, func(t *testing.T) {
					err := v.Verify(context.Background(), tt.token, netip.MustParseAddr("::ffff:198.51.100.7"))
					var rejected *otp.ChallengeRejected
					switch {
					case tt.rejected && !errors.As(err, &rejected):
						t.Fatalf("got %v; want a rejection", err)
					case tt.failed && (err == nil || errors.As(err, &rejected)):
						t.Fatalf("got %v; want a failure to ask", err)
					case !tt.rejected && !tt.failed && err != nil:
						t.Fatalf("got %v; want it accepted", err)
					}
					if rejected != nil {
						for _, c := range rejected.Codes {
							if len(c) > 64 || strings.ContainsAny(c, "\x00") {
								t.Fatalf("unsanitized vendor code %q", c)
							}
						}
					}
				})
			}
		})
	}
	vendor.mu.Lock()
	defer vendor.mu.Unlock()
	if !strings.HasSuffix(vendor.asked[0], "@198.51.100.7") {
		t.Fatalf("remoteip not passed as plain IPv4: %q", vendor.asked[0])
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Provider: "turnstile", SiteKey: "k", Secret: "s3cret-key", Timeout: time.Second}
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"provider", func(c *Config) { c.Provider = "captcha" }, "pumping.challenge.provider"},
		{"site key", func(c *Config) { c.SiteKey = "" }, "pumping.challenge.site_key"},
		{"secret", func(c *Config) { c.Secret = "" }, "SMSGW_CHALLENGE_SECRET"},
		{"url", func(c *Config) { c.VerifyURL = "ftp://x" }, "pumping.challenge.verify_url"},
		{"score", func(c *Config) { c.MinScore = 2 }, "pumping.challenge.min_score"},
		{"timeout", func(c *Config) { c.Timeout = 0 }, "pumping.challenge.timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.edit(&c)
			if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("got %v; want an error naming %s", err, tt.want)
			}
		})
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("off: %v", err)
	}
	if err := ok.Validate(); err != nil {
		t.Fatal(fmt.Sprint(err))
	}
}
