package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"smsgw/internal/testenv"
)

// TestSignupPage drives examples/signup, served from an origin of its own,
// in headless Chromium against the binary, beside a backend's secret key:
// the page's publishable key and CORS from that origin, every
// error said in words, the fake provider's code read through the
// admin-guarded outbox. SMSGW_DOCS_SCREENSHOTS=1 refreshes its picture in
// docs/.
func TestSignupPage(t *testing.T) {
	t.Parallel()
	ctx := testenv.Browser(t, 640, 720)
	page := httptest.NewServer(http.FileServer(http.Dir("../examples/signup")))
	t.Cleanup(page.Close)
	e := newEnv(t)
	// The page's key as examples/signup/smsgw.toml lists it, bound to the
	// test's origin, and a backend's secret key beside it.
	const backendKey = "sk-signup-backend-0123456789"
	p := start(t, e, fmt.Sprintf(`[[api.keys]]
name = "signup-page"
sha256 = "c69dc62efdc835493d6a3d8056696b3a84d66497705d8d6267fc317632ffe82a"
enabled = true
publishable = true
origins = [%q]

[[api.keys]]
name = "signup-backend"
sha256 = %q
enabled = true
forward_client_ip = true
`, page.URL, sha256Hex(backendKey)))

	const phone = "+447400123456"
	text := func(sel chromedp.CSS) string {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.WaitVisible(sel)); err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		got, err := chromedp.Run(ctx, chromedp.Text(sel))
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		return got
	}
	// waitText waits until sel shows a text containing want.
	waitText := func(sel chromedp.CSS, want string) {
		t.Helper()
		testenv.WaitUntil(t, 30*time.Second, fmt.Sprintf("%s to show %q", sel, want), func() error {
			if got := text(sel); !strings.Contains(got, want) {
				return fmt.Errorf("%s says %q", sel, got)
			}
			return nil
		})
	}
	run := func(actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatal(err)
		}
	}
	// typeIn replaces what field holds with value, as a person types it.
	typeIn := func(field chromedp.CSS, value string) chromedp.Action[chromedp.Void] {
		clear := chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := chromedp.Evaluate[any](`document.querySelector("`+string(field)+`").value = ""`)(ctx, t)
			return err
		})
		return chromedp.Steps(clear, chromedp.SendKeys(field, value))
	}

	run(chromedp.Navigate(page.URL+"/index.html?smsgw="+p.URL), chromedp.WaitVisible(chromedp.CSS("#phone")))
	autocomplete, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS("#code"), "autocomplete"))
	if err != nil || autocomplete.Value != "one-time-code" {
		t.Fatalf("the code field's autocomplete is %q (%v)", autocomplete.Value, err)
	}

	t.Run("not a number", func(t *testing.T) {
		run(typeIn("#phone", "12"), chromedp.Click(chromedp.CSS("#send")))
		waitText("#error", "does not look like a phone number")
	})
	t.Run("a landline is refused in words", func(t *testing.T) {
		run(typeIn("#phone", "+44 20 7946 0958"), chromedp.Click(chromedp.CSS("#send")))
		waitText("#error", "Please use a mobile number")
	})
	t.Run("sent", func(t *testing.T) {
		run(typeIn("#phone", "+44 7400 123456"), chromedp.Click(chromedp.CSS("#send")))
		waitText("#sent-to", "We texted a code to "+phone)
	})
	t.Run("a wrong code", func(t *testing.T) {
		run(typeIn("#code", "000000"), chromedp.Click(chromedp.CSS("#verify")))
		waitText("#error", "That code is wrong. You have 4 tries left.")
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		testenv.Screenshot(t, "signup-page.png", png)
	})
	t.Run("the right code", func(t *testing.T) {
		bodies := outboxBodies(t, p, phone)
		if len(bodies) != 1 {
			t.Fatalf("outbox %v", bodies)
		}
		run(typeIn("#code", codeIn(bodies[0])), chromedp.Click(chromedp.CSS("#verify")))
		waitText("#done", "Your number "+phone+" is verified.")
	})
	t.Run("a new code too soon", func(t *testing.T) {
		run(chromedp.Navigate(page.URL+"/index.html?smsgw="+p.URL), chromedp.WaitVisible(chromedp.CSS("#phone")),
			typeIn("#phone", phone), chromedp.Click(chromedp.CSS("#send")))
		waitText("#error", "We just texted this number. You can ask for a new code in")
	})
	t.Run("smsgw unreachable", func(t *testing.T) {
		run(chromedp.Navigate(page.URL+"/index.html?smsgw=http://"+testenv.FreeAddr(t)), chromedp.WaitVisible(chromedp.CSS("#phone")),
			typeIn("#phone", phone), chromedp.Click(chromedp.CSS("#send")))
		waitText("#error", "We could not reach the verification service.")
	})
	t.Run("a backend beside the page", func(t *testing.T) {
		r := post(t, p.URL+"/v1/otp/send", `{"phone": "+447400123458", "client_ip": "203.0.113.8"}`,
			map[string]string{"Authorization": "Bearer " + backendKey})
		if r.Status != 202 {
			t.Fatalf("%d %s", r.Status, r.Raw)
		}
		r = post(t, p.URL+"/v1/otp/send", `{"phone": "+447400123459"}`, nil)
		if r.Status != 401 {
			t.Fatalf("without a key: %d %s", r.Status, r.Raw)
		}
	})
	// A newcomer's mistake: the config lists the page at 127.0.0.1, the
	// page is opened at localhost (or the other way round). The browser
	// hides why the call failed (CORS); the page tells it from smsgw being
	// down and names the setting.
	t.Run("an origin smsgw does not list", func(t *testing.T) {
		other := strings.Replace(page.URL, "127.0.0.1", "localhost", 1)
		run(chromedp.Navigate(other+"/index.html?smsgw="+p.URL), chromedp.WaitVisible(chromedp.CSS("#phone")),
			typeIn("#phone", "+44 7400 123457"), chromedp.Click(chromedp.CSS("#send")))
		waitText("#error", "This page's origin ("+other+") is not allowed to call the verification service. "+
			`Add "`+other+`" to origins in the [[api.keys]] entry of this page's publishable key`)
		if bodies := outboxBodies(t, p, "+447400123457"); len(bodies) != 0 {
			t.Fatalf("texted from an origin not listed: %v", bodies)
		}
	})
}
