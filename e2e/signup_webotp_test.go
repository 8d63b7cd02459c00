package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"smsgw/internal/testenv"
)

// webOTPStub stands in for the WebOTP API, which headless Chromium has no
// text to feed: it is injected by the test before the page's scripts run,
// never shipped in the page. navigator.credentials.get records what it was
// asked and, unless the page's address has ?webotp=hold, resolves with the
// code the exposed smsgwTestCode reads from the fake provider's text (as a
// phone would, from its "@<host> #<code>" line); an abort rejects it with
// an AbortError, as the browser does.
const webOTPStub = `(() => {
  window.OTPCredential = function OTPCredential() {};
  const calls = (window.__webotp = []);
  const hold = new URLSearchParams(location.search).get("webotp") === "hold";
  const get = (options) => {
    const call = { transport: options && options.otp && options.otp.transport,
      signal: !!(options && options.signal instanceof AbortSignal), aborted: false, resolved: false };
    calls.push(call);
    return new Promise((resolve, reject) => {
      const abort = () => { call.aborted = true; reject(new DOMException("aborted", "AbortError")); };
      if (options.signal) {
        if (options.signal.aborted) return abort();
        options.signal.addEventListener("abort", abort);
      }
      if (hold) return;
      const poll = () => {
        if (call.aborted) return;
        window.smsgwTestCode().then((code) => {
          if (call.aborted) return;
          if (!code) return setTimeout(poll, 100);
          call.resolved = true;
          resolve({ type: "otp", id: "", code });
        }, reject);
      };
      poll();
    });
  };
  Object.defineProperty(navigator, "credentials", { value: { get }, configurable: true });
})();`

// webOTPLine is the last line of a text for WebOTP on the test page's host.
var webOTPLine = regexp.MustCompile(`\n@127\.0\.0\.1 #(\d{6})$`)

// TestSignupPageWebOTP drives examples/signup where the browser has the
// WebOTP API (stubbed by the test, see webOTPStub): the page asks for an
// SMS code with an AbortSignal once the text is sent, fills in what the
// browser reads and verifies it with no typing; a person who types aborts
// the request. The page's key sets the WebOTP domain to the page's host,
// so the text carries the line a browser would check.
func TestSignupPageWebOTP(t *testing.T) {
	t.Parallel()
	ctx := testenv.Browser(t, 640, 720)
	pageSrv := httptest.NewServer(http.FileServer(http.Dir("../examples/signup")))
	t.Cleanup(pageSrv.Close)
	e := newEnv(t)
	p := start(t, e, fmt.Sprintf(`[[api.keys]]
name = "signup-page"
sha256 = "c69dc62efdc835493d6a3d8056696b3a84d66497705d8d6267fc317632ffe82a"
enabled = true
publishable = true
origins = [%q]
webotp_domain = "127.0.0.1"
`, pageSrv.URL))

	// number is the phone whose text smsgwTestCode reads.
	var number atomic.Value
	number.Store("+447400123456")
	current := func() string { return number.Load().(string) }
	readCode := func(ctx context.Context, _ []any) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/v1/fake/messages?phone="+url.QueryEscape(current()), nil)
		if err != nil {
			return "", err
		}
		req.Header.Set("Authorization", "Bearer "+adminToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		var msgs []struct{ Body string }
		if err := json.Unmarshal(raw, &msgs); err != nil {
			return "", fmt.Errorf("outbox: %s", raw)
		}
		if len(msgs) == 0 {
			return "", nil // not texted yet: the stub asks again
		}
		m := webOTPLine.FindStringSubmatch(msgs[len(msgs)-1].Body)
		if m == nil {
			return "", fmt.Errorf("the text has no WebOTP line for 127.0.0.1: %q", msgs[len(msgs)-1].Body)
		}
		return m[1], nil
	}
	if err := chromedp.Do(ctx, chromedp.ExposeFunc("smsgwTestCode", readCode)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: webOTPStub}); err != nil {
		t.Fatal(err)
	}

	run := func(actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatal(err)
		}
	}
	eval := func(expr string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}
	waitEval := func(what, expr, want string) {
		t.Helper()
		testenv.WaitUntil(t, 30*time.Second, what, func() error {
			if got := eval(expr); got != want {
				return fmt.Errorf("%s is %q, want %q", expr, got, want)
			}
			return nil
		})
	}
	calls := `JSON.stringify(window.__webotp)`

	t.Run("the code fills itself in and is verified", func(t *testing.T) {
		run(chromedp.Navigate(pageSrv.URL+"/index.html?smsgw="+p.URL), chromedp.WaitVisible(chromedp.CSS("#phone")),
			chromedp.SendKeys(chromedp.CSS("#phone"), current()), chromedp.Click(chromedp.CSS("#send")))
		waitEval("the page verified the code WebOTP gave it", `document.querySelector("#done").hidden ? "" : document.querySelector("#done").textContent`,
			"Your number "+current()+" is verified. Welcome!")
		bodies := outboxBodies(t, p, current())
		if len(bodies) != 1 {
			t.Fatalf("outbox %v", bodies)
		}
		if got := eval(`document.querySelector("#code").value`); got != codeIn(bodies[0]) {
			t.Fatalf("the code field holds %q, the text %q", got, bodies[0])
		}
		if got := eval(calls); got != `[{"transport":["sms"],"signal":true,"aborted":false,"resolved":true}]` {
			t.Fatalf("WebOTP calls: %s", got)
		}
	})
	t.Run("typing aborts the request", func(t *testing.T) {
		number.Store("+447400123460")
		run(chromedp.Navigate(pageSrv.URL+"/index.html?webotp=hold&smsgw="+p.URL), chromedp.WaitVisible(chromedp.CSS("#phone")),
			chromedp.SendKeys(chromedp.CSS("#phone"), current()), chromedp.Click(chromedp.CSS("#send")),
			chromedp.WaitVisible(chromedp.CSS("#code")))
		waitEval("the page to ask WebOTP for the code", calls, `[{"transport":["sms"],"signal":true,"aborted":false,"resolved":false}]`)
		bodies := outboxBodies(t, p, current())
		if len(bodies) != 1 {
			t.Fatalf("outbox %v", bodies)
		}
		run(chromedp.SendKeys(chromedp.CSS("#code"), codeIn(bodies[0])[:1]))
		waitEval("typing to abort the WebOTP request", calls, `[{"transport":["sms"],"signal":true,"aborted":true,"resolved":false}]`)
		run(chromedp.SendKeys(chromedp.CSS("#code"), codeIn(bodies[0])[1:]), chromedp.Click(chromedp.CSS("#verify")))
		waitEval("the typed code verified", `document.querySelector("#done").textContent`, "Your number "+current()+" is verified. Welcome!")
		if strings.Contains(eval(calls), `"resolved":true`) {
			t.Fatalf("an aborted request resolved: %s", eval(calls))
		}
	})
}
