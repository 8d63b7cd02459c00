package console_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"smsgw/internal/testenv"
	"smsgw/otp"
)

// newBrowser starts a headless Chromium with a fresh profile.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	return testenv.Browser(t, 1280, 900)
}

// artifact saves a screenshot with the test artifacts; SMSGW_DOCS_SCREENSHOTS=1
// refreshes the README's.
func artifact(t *testing.T, name string, png []byte) {
	t.Helper()
	testenv.Screenshot(t, name, png)
}

func docsScreenshots() bool { return os.Getenv("SMSGW_DOCS_SCREENSHOTS") != "" }

// history writes a day of earlier audit rows through the real writer, so
// that the README's screenshots show charts with a shape; only when making
// them (SMSGW_DOCS_SCREENSHOTS=1).
func history(t *testing.T, r *rig) {
	t.Helper()
	now := time.Now().UTC()
	n := 0
	row := func(at time.Time, kind, outcome, reason, phone string) {
		n++
		ev := otp.AuditEvent{ID: fmt.Sprintf("00000000-0000-7000-8000-%012d", n), Time: at, Kind: kind, Outcome: outcome,
			RequestID: fmt.Sprintf("history-%d", n), Phone: phone, Reason: reason, ClientIP: netip.MustParseAddr("198.51.100.200")}
		if err := r.audit.Record(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	phones := []string{"+14155550100", "+447400111222", "+4915111122233", "+5511911122233", "+233241112223"}
	for m := 5; m < 24*60; m += 5 {
		at := now.Add(-time.Duration(m) * time.Minute)
		load := 2 + (m/60)%5 + (m/5)%3
		if m < 60 {
			load += 3
		}
		for i := range load {
			p := phones[(m+i)%len(phones)]
			row(at, otp.KindSend, otp.OutcomeSent, "", p)
			if !strings.HasPrefix(p, "+233") && (m/5+i)%7 != 3 {
				row(at.Add(30*time.Second), otp.KindVerify, otp.OutcomeApproved, "", p)
			}
			if i%3 == 0 {
				row(at.Add(40*time.Second), otp.KindSend, otp.ERateLimited, "phone:1m", p)
			}
		}
		if m%45 == 0 {
			row(at, otp.KindSend, otp.EPhoneNotAllowed, "type:premium_rate", "+19005550100")
		}
	}
}

// traffic gives the overview something to show: texts to a few countries
// from several client addresses, some verified, some refused.
func traffic(t *testing.T, r *rig) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 30 * time.Second}
	post := func(path, body, from string) testenv.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, r.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Forwarded-For", from)
		return testenv.Do(t, client, req)
	}
	// Pumping: a block of 100 numbers nobody verifies, from rotating
	// addresses; the third is held by the range_100 rule.
	for i, p := range []string{"+233241239901", "+233241239902", "+233241239903"} {
		post("/v1/otp/send", `{"phone":"`+p+`"}`, fmt.Sprintf("203.0.113.%d", i+1))
	}
	// Pumping: a block of 100 numbers nobody verifies, from rotating
	// addresses; the third is held by the range_100 rule.
	for i, p := range []string{"+233241239901", "+233241239902", "+233241239903"} {
		post("/v1/otp/send", `{"phone":"`+p+`"}`, fmt.Sprintf("203.0.113.%d", i+1))
	}
	phones := []string{"+14155552671", "+14155550123", "+447400123456", "+447400654321", "+233241234567", "+233201234567",
		"+233271234567", "+4915123456789", "+5511912345678", "+14155550188"}
	for i, p := range phones {
		from := fmt.Sprintf("198.51.100.%d", i+1)
		if res := post("/v1/otp/send", `{"phone":"`+p+`"}`, from); res.Status != http.StatusAccepted {
			t.Fatalf("send %s: %d %s", p, res.Status, res.Raw)
		}
		post("/v1/otp/send", `{"phone":"`+p+`"}`, from) // refused: phone:1m
		if strings.HasPrefix(p, "+233") || p == "+14155552671" {
			continue // nobody verifies these; the looked-up phone keeps its code pending
		}
		msgs := r.svc.Outbox.Messages(p)
		code := regexp.MustCompile(`\d{6}`).FindString(msgs[len(msgs)-1].Body)
		if res := post("/v1/otp/verify", `{"phone":"`+p+`","code":"`+code+`"}`, from); res.Status != http.StatusOK {
			t.Fatalf("verify %s: %d %s", p, res.Status, res.Raw)
		}
	}
}

// TestConsoleInABrowser drives the console in Chromium as an operator
// would: a wrong token refused, sign-in, a look-up in another notation than
// the send used, Reset limits, and the effect confirmed through the API.
func TestConsoleInABrowser(t *testing.T) {
	r := pumpingRig(t)
	if docsScreenshots() {
		history(t, r)
	}
	traffic(t, r)
	ctx := newBrowser(t)
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// submit clicks a button and waits for the page it leads to.
	submit := func(what string, sel chromedp.CSS) {
		t.Helper()
		res, err := chromedp.RunResponse(ctx, chromedp.Click(sel))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if res == nil {
			t.Fatalf("%s: no page loaded", what)
		}
	}
	text := func(sel chromedp.CSS) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(sel))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}

	step("open the console", chromedp.Navigate(r.URL+"/console"), chromedp.WaitVisible(chromedp.CSS("#token")))
	if l := text("label[for=token]"); l != "Admin token" {
		t.Fatalf("the token field is labelled %q", l)
	}
	step("type a wrong token", chromedp.SendKeys(chromedp.CSS("#token"), "not-the-token"))
	submit("sign in with it", "form button[type=submit]")
	if msg := text("[role=alert]"); !strings.Contains(msg, "not right") {
		t.Fatalf("a wrong token answered %q", msg)
	}
	step("type the token", chromedp.SendKeys(chromedp.CSS("#token"), token))
	submit("sign in", "form button[type=submit]")
	step("the overview", chromedp.WaitVisible(chromedp.CSS("svg.chart")))
	if h := text("main h1"); h != "Overview" {
		t.Fatalf("after sign-in: %q", h)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	artifact(t, "console-overview.png", png)

	submit("go to Phone", `nav a[href="/console/phone"]`)
	if l := text("label[for=phone]"); l != "Phone" {
		t.Fatalf("the phone field is labelled %q", l)
	}
	// Sent as +14155552671; looked up in national notation.
	step("type a number", chromedp.SendKeys(chromedp.CSS("#phone"), "(415) 555-2671"))
	submit("look it up", `form[role=search] button[type=submit]`)
	if h := text("#h-number"); h != "+14155552671" {
		t.Fatalf("look-up shows %q", h)
	}
	windows := text("#windows")
	if !regexp.MustCompile(`phone\s+1m\s+1\s+1\s`).MatchString(windows) {
		t.Fatalf("windows before the reset:\n%s", windows)
	}
	if c := text("#code-state"); !strings.HasPrefix(c, "yes, 5 attempts left") {
		t.Fatalf("code state %q", c)
	}
	if trail := text("table.trail"); !strings.Contains(trail, "rate_limited") || !strings.Contains(trail, "sent") {
		t.Fatalf("audit trail:\n%s", trail)
	}
	png, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	artifact(t, "console-phone.png", png)

	submit("Reset limits", `form[action="/console/phone/reset"] button`)
	if n := text("[role=status]"); !strings.Contains(n, "Limits reset") {
		t.Fatalf("after Reset limits: %q", n)
	}
	if windows := text("#windows"); regexp.MustCompile(`phone\s+\S+\s+[1-9]`).MatchString(windows) {
		t.Fatalf("windows after the reset:\n%s", windows)
	}

	// The effect, through the admin API.
	req, _ := http.NewRequest(http.MethodGet, r.URL+"/v1/admin/limits?phone=%2B14155552671", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res := testenv.Do(t, http.DefaultClient, req)
	var view struct {
		Windows []struct {
			Scope string `json:"scope"`
			Used  int    `json:"used"`
		} `json:"windows"`
	}
	if err := json.Unmarshal(res.Raw, &view); err != nil || res.Status != 200 || len(view.Windows) == 0 {
		t.Fatalf("admin API: %d %s", res.Status, res.Raw)
	}
	for _, w := range view.Windows {
		if w.Used != 0 {
			t.Fatalf("after Reset limits the API shows %s used %d", w.Scope, w.Used)
		}
	}
	// A wrong admin token is refused by the API as by the console.
	req, _ = http.NewRequest(http.MethodGet, r.URL+"/v1/admin/limits?phone=%2B14155552671", nil)
	req.Header.Set("Authorization", "Bearer not-the-token")
	if res := testenv.Do(t, http.DefaultClient, req); res.Status != http.StatusUnauthorized {
		t.Fatalf("wrong API token: %d", res.Status)
	}

	// Keyboard: "/" jumps to the search field.
	step("press /", chromedp.KeyEvent("/"))
	focused, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement.id`))
	if err != nil || focused != "phone" {
		t.Fatalf("after / the focus is on %q (%v)", focused, err)
	}

	submit("sign out", `form[action="/console/signout"] button`)
	step("back at sign-in", chromedp.WaitVisible(chromedp.CSS("#token")))
	requireAdminRows(t, r.pool, "console.signin unauthorized", "console.signin ok", "console.overview.get ok",
		"console.phone.get ok", "console.limits.delete ok", "console.signout ok")
}
