package console_test

import (
	"context"
	"crypto/tls"
	"encoding/csv"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"smsgw/api"
	"smsgw/audit"
	"smsgw/codestore"
	"smsgw/console"
	"smsgw/internal/app"
	"smsgw/internal/app/apptest"
	"smsgw/internal/redisbatch"
	"smsgw/internal/testenv"
	"smsgw/otp"
	"smsgw/pumping"
)

const token = "console-admin-token-for-tests"

// rig is the API and the console of one service on the test Redis and a
// fresh Postgres database, mounted as the service mounts them.
type rig struct {
	URL   string
	audit *audit.Writer
	svc   apptest.Service
	pool  *pgxpool.Pool
	clock *testenv.Clock
}

func newRig(t *testing.T, tlsServer bool) *rig { t.Helper(); return newRigWith(t, tlsServer, nil) }

// newRigWith runs the pumping guard too when pump is set.
func newRigWith(t *testing.T, tlsServer bool, pump *pumping.Config, config ...func(*app.Config)) *rig {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	opts := apptest.Options{Pumping: pump}
	if len(config) > 0 {
		opts.Config = config[0]
	}
	svc := apptest.New(t, opts)
	ctx := context.Background()
	pool := testenv.Pool(t)
	reg := prometheus.NewRegistry()
	w, err := audit.NewWriter(pool, audit.Options{SpoolDir: t.TempDir(), Metrics: reg}, log)
	if err != nil {
		t.Fatal(err)
	}
	go w.Run(ctx) // Close ends it and waits
	t.Cleanup(func() { w.Close(context.Background()) })
	reader := audit.NewReader(pool)
	clock := testenv.NewClock(time.Now())
	failures := otp.NewAuthFailures(5, time.Minute, 64)
	failures.Now = clock.Now
	proxies := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")} // X-Forwarded-For picks the client
	ips := api.NewClientIPs(proxies)
	deps := api.Deps{Service: svc.Service, AuditLog: w, AuditReader: reader, Pumping: svc.Guard, Metrics: reg,
		Endpoints: []otp.Endpoint{svc.Outbox.Outbox("US")}}
	var admin otp.PumpingAdmin
	if pump != nil {
		admin = svc.Guard
	}
	apiHandler := api.NewServer(log, api.Config{TrustedProxies: proxies, DefaultRegion: "US", AdminToken: token, MaxAttempts: 5}, deps)
	con := console.New(log, console.Options{AdminToken: token, DefaultRegion: "US", MaxAttempts: 5,
		ClientIP: ips.Resolve, StatusOf: api.StatusOf, Now: clock.Now,
		TextPrice: func(string) float64 { return 0.05 }},
		console.Deps{Support: svc.Service, Codes: codestore.New(svc.Redis, svc.Prefix, redisbatch.New(svc.Redis, redisbatch.Options{})),
			AuditLog: w, Audit: reader, Metrics: reg, Failures: failures, Pumping: admin, Keys: svc.Service})
	mux := http.NewServeMux()
	mux.Handle("/console", con)
	mux.Handle("/console/", con)
	mux.Handle("/", apiHandler)
	var srv *httptest.Server
	if tlsServer {
		srv = httptest.NewTLSServer(mux)
	} else {
		srv = httptest.NewServer(mux)
	}
	t.Cleanup(srv.Close)
	return &rig{URL: srv.URL, audit: w, svc: svc, pool: pool, clock: clock}
}

// browser is an HTTP client with cookies, as a browser signed in would be.
type browser struct {
	t      *testing.T
	c      *http.Client
	base   string
	origin string
	from   string // X-Forwarded-For: another client address
}

func (r *rig) browser(t *testing.T) *browser {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	return &browser{t: t, c: c, base: r.URL, origin: r.URL}
}

type page struct {
	status int
	header http.Header
	body   string
	url    string
}

func (b *browser) do(method, path string, form url.Values, header map[string]string) page {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", b.origin)
	}
	if b.from != "" {
		req.Header.Set("X-Forwarded-For", b.from)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return page{status: res.StatusCode, header: res.Header, body: html.UnescapeString(string(raw)), url: res.Request.URL.String()}
}

func (b *browser) get(path string) page { b.t.Helper(); return b.do(http.MethodGet, path, nil, nil) }

func (b *browser) post(path string, form url.Values) page {
	b.t.Helper()
	return b.do(http.MethodPost, path, form, nil)
}

func (b *browser) signIn(tok string) page {
	b.t.Helper()
	return b.post("/console/signin", url.Values{"token": {tok}})
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrf(t *testing.T, p page) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no CSRF token on the page:\n%.2000s", p.body)
	}
	return m[1]
}

// requireAdminRows fails the test unless the console's audit rows ("reason
// outcome") include each of want.
func requireAdminRows(t *testing.T, pool *pgxpool.Pool, want ...string) {
	t.Helper()
	// A row is durable before the answer, but may reach Postgres later
	// through the spool when a write is slow (a loaded machine).
	testenv.WaitUntil(t, 0, "the console's audit rows", func() error {
		rows := strings.Join(adminRows(t, pool), "\n")
		for _, w := range want {
			if !strings.Contains(rows, w) {
				return fmt.Errorf("audit lacks %q:\n%s", w, rows)
			}
		}
		return nil
	})
}

// adminRows are the audit rows of console actions, oldest first.
func adminRows(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	return testenv.Strings(t, pool,
		`SELECT reason || ' ' || outcome FROM audit_log WHERE kind = 'admin' AND reason LIKE 'console.%' ORDER BY created_at, id`)
}

func apiSend(t *testing.T, r *rig, phone string) {
	t.Helper()
	if st := sendFrom(t, r, phone, ""); st != http.StatusAccepted {
		t.Fatalf("send %s: %d", phone, st)
	}
}

// sendFrom sends through the API, from a client address when from is set,
// and returns the status.
func sendFrom(t *testing.T, r *rig, phone, from string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.URL+"/v1/otp/send", strings.NewReader(`{"phone":"`+phone+`"}`))
	req.Header.Set("Content-Type", "application/json")
	if from != "" {
		req.Header.Set("X-Forwarded-For", from)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 30 * time.Second}
	st := testenv.Do(t, client, req).Status
	if st == http.StatusAccepted {
		// A send's final outcome is written just after its answer: wait
		// for it, so the console shows the text as sent.
		testenv.WaitFor(t, 0, "the send to "+phone+" to be sent", func() bool {
			var sending bool
			if err := r.pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM audit_log WHERE outcome = 'sending')`).Scan(&sending); err != nil {
				t.Fatal(err)
			}
			return !sending
		})
	}
	return st
}

func regexpFind(t *testing.T, s, re string) string {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no %s in:\n%.3000s", re, s)
	}
	return m[1]
}

func TestSignIn(t *testing.T) {
	r := newRig(t, false)
	b := r.browser(t)
	first := b.get("/console")
	if first.status != 200 || !strings.Contains(first.body, `<label for="token">Admin token</label>`) {
		t.Fatalf("sign-in page: %d\n%.1000s", first.status, first.body)
	}
	if csp := first.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || first.header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("security headers: %v", first.header)
	}
	if got := b.get("/console/phone"); !strings.Contains(got.body, "Admin token") {
		t.Fatalf("a page without a session must lead to sign-in, got %d", got.status)
	}
	if p := b.signIn("wrong"); p.status != http.StatusUnauthorized || !strings.Contains(p.body, "not right") {
		t.Fatalf("wrong token: %d\n%.1000s", p.status, p.body)
	}

	// The cookie, as the browser receives it.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noFollow.PostForm(r.URL+"/console/signin", url.Values{"token": {token}, "next": {"/console/phone"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/console/phone" {
		t.Fatalf("sign-in answered %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	cookies := res.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies %v", cookies)
	}
	c := cookies[0]
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure || c.Path != "/console" || c.MaxAge <= 0 || c.MaxAge > 8*3600 {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, not Secure over plain HTTP, /console, expiring within 8h", c)
	}

	ok := b.signIn(token)
	if ok.status != 200 || !strings.Contains(ok.body, "Texts sent") {
		t.Fatalf("signed in: %d\n%.1000s", ok.status, ok.body)
	}
	// An open redirect through next is refused.
	res, err = noFollow.PostForm(r.URL+"/console/signin", url.Values{"token": {token}, "next": {"//evil.example/x"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if loc := res.Header.Get("Location"); loc != "/console" {
		t.Errorf("next=//evil.example/x redirected to %q", loc)
	}

	// Sign-out ends the session for good, even with the old cookie.
	old := b.c.Jar.Cookies(mustURL(t, r.URL+"/console"))
	out := b.post("/console/signout", url.Values{"csrf": {csrf(t, ok)}})
	if !strings.Contains(out.body, "Admin token") {
		t.Fatalf("after sign-out: %d %.500s", out.status, out.body)
	}
	replay := r.browser(t)
	replay.c.Jar.SetCookies(mustURL(t, r.URL+"/console"), old)
	if p := replay.get("/console/phone"); !strings.Contains(p.body, "Admin token") {
		t.Fatalf("the signed-out cookie still works: %d", p.status)
	}

	// Sessions expire.
	later := r.browser(t)
	later.signIn(token)
	r.clock.Set(r.clock.Now().Add(8*time.Hour + time.Second))
	if p := later.get("/console/phone"); !strings.Contains(p.body, "Admin token") {
		t.Fatalf("an expired session still works: %d", p.status)
	}

	rows := adminRows(t, r.pool)
	want := []string{"console.signin unauthorized", "console.signin ok"}
	for i, w := range want {
		if i >= len(rows) || rows[i] != w {
			t.Fatalf("audit rows %v, want them to start with %v", rows, want)
		}
	}
}

func TestSecureCookieUnderTLS(t *testing.T) {
	r := newRig(t, true)
	b := r.browser(t)
	noFollow := &http.Client{Transport: b.c.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noFollow.PostForm(r.URL+"/console/signin", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if cs := res.Cookies(); len(cs) != 1 || !cs[0].Secure {
		t.Fatalf("cookies under TLS %+v: want Secure", cs)
	}
}

// Wrong tokens are slowed down per client address, on the sign-in form and
// on the admin API alike, since they share one throttle in the service.
func TestFailedSignInsAreThrottled(t *testing.T) {
	r := newRig(t, false)
	b := r.browser(t)
	for i := range 5 {
		if p := b.signIn("guess"); p.status != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d", i, p.status)
		}
	}
	p := b.signIn("guess")
	if p.status != http.StatusTooManyRequests || p.header.Get("Retry-After") == "" {
		t.Fatalf("sixth wrong token: %d %v", p.status, p.header)
	}
	if p := b.signIn(token); p.status != http.StatusTooManyRequests {
		t.Fatalf("while throttled even the right token waits: %d", p.status)
	}
	other := r.browser(t)
	other.from = "198.51.100.7"
	if p := other.signIn("guess"); p.status != http.StatusUnauthorized {
		t.Fatalf("another address must not be throttled: %d", p.status)
	}
	r.clock.Set(r.clock.Now().Add(time.Minute + time.Second))
	if p := b.signIn(token); p.status != http.StatusOK || !strings.Contains(p.body, "Texts sent") {
		t.Fatalf("after the window the right token works again: %d", p.status)
	}
}

func TestCSRF(t *testing.T) {
	r := newRig(t, false)
	apiSend(t, r, "+14155552671")
	b := r.browser(t)
	mine := csrf(t, b.signIn(token))
	other := r.browser(t)
	otherToken := csrf(t, other.signIn(token))

	tests := []struct {
		name   string
		form   url.Values
		header map[string]string
	}{
		{"no token", url.Values{"phone": {"+14155552671"}}, nil},
		{"another session's token", url.Values{"phone": {"+14155552671"}, "csrf": {otherToken}}, nil},
		{"another site", url.Values{"phone": {"+14155552671"}, "csrf": {mine}}, map[string]string{"Origin": "https://evil.example"}},
		{"a cross-site fetch", url.Values{"phone": {"+14155552671"}, "csrf": {mine}}, map[string]string{"Sec-Fetch-Site": "cross-site"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := b.do(http.MethodPost, "/console/phone/reset", tt.form, tt.header)
			if p.status != http.StatusForbidden {
				t.Fatalf("%d %.300s", p.status, p.body)
			}
			v, err := r.svc.Limits(context.Background(), "+14155552671", "")
			if err != nil || v.Windows[0].Used != 1 {
				t.Fatalf("the refused reset changed the limits: %+v %v", v.Windows, err)
			}
		})
	}
}

var windowRE = regexp.MustCompile(`<td>phone</td><td>1m</td><td class="num">(\d+)</td><td class="num">1</td>`)

func TestPhoneLookUpAndReset(t *testing.T) {
	r := newRig(t, false)
	apiSend(t, r, "(415) 555-2671")
	b := r.browser(t)
	b.signIn(token)

	// The send's final outcome is written without the client waiting
	// (otp.AuditLog.Finish): the page shows "sent" once it is in.
	var p page
	testenv.WaitUntil(t, 30*time.Second, "the send's final row on the phone page", func() error {
		if p = b.get("/console/phone?phone=" + url.QueryEscape("+1 415-555-2671")); !strings.Contains(p.body, `<span class="badge o-sent">sent</span>`) {
			return errors.New("not yet")
		}
		return nil
	})
	for _, want := range []string{"+14155552671", "fixed_line_or_mobile", "<dd>US</dd>", "4 attempts left"[0:0] + "5 attempts left", `<span class="badge o-sent">sent</span>`, `>Reset limits</button>`,
		// The text's segments, on its row in the trail.
		`<td class="num segments">1</td>`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("phone page lacks %q", want)
		}
	}
	if m := windowRE.FindStringSubmatch(p.body); m == nil || m[1] != "1" {
		t.Fatalf("phone 1m window: %v\n%.3000s", m, p.body)
	}
	for _, msg := range r.svc.Outbox.Messages("+14155552671") {
		code := regexp.MustCompile(`\d{6}`).FindString(msg.Body)
		if code == "" || strings.Contains(p.body, code) {
			t.Fatalf("the page shows the code %q (or there is none)", code)
		}
	}

	done := b.post("/console/phone/reset", url.Values{"phone": {"+14155552671"}, "csrf": {csrf(t, p)}})
	if !strings.Contains(done.body, "Limits reset") {
		t.Fatalf("after reset: %d %.2000s", done.status, done.body)
	}
	if m := windowRE.FindStringSubmatch(done.body); m == nil || m[1] != "0" {
		t.Fatalf("after reset the window shows %v", m)
	}
	// Through the API too.
	req, _ := http.NewRequest(http.MethodGet, r.URL+"/v1/admin/limits?phone=%2B14155552671", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if res := testenv.Do(t, http.DefaultClient, req); res.Status != 200 || strings.Contains(string(res.Raw), `"used":1`) {
		t.Fatalf("admin API after the console reset: %d %s", res.Status, res.Raw)
	}

	cancel := b.post("/console/phone/cancel", url.Values{"phone": {"+14155552671"}, "csrf": {csrf(t, done)}})
	if !strings.Contains(cancel.body, "The pending code is cancelled") || !strings.Contains(cancel.body, `<dd id="code-state">none</dd>`) {
		t.Fatalf("after cancel: %.2000s", cancel.body)
	}

	bad := b.get("/console/phone?phone=hello")
	if bad.status != http.StatusBadRequest || !strings.Contains(bad.body, `role="alert"`) {
		t.Fatalf("a bad number: %d", bad.status)
	}

	requireAdminRows(t, r.pool, "console.phone.get ok", "console.limits.delete ok", "console.code.cancel ok", "console.phone.get invalid_phone")
}

func TestNetworkLookUp(t *testing.T) {
	r := newRig(t, false)
	apiSend(t, r, "+14155552671")
	b := r.browser(t)
	b.signIn(token)
	// The send's row gets its final outcome without the client waiting
	// (otp.AuditLog.Finish): the page shows it once it is written.
	var p page
	testenv.WaitUntil(t, 30*time.Second, "the send on the network page", func() error {
		if p = b.get("/console/network?ip=127.0.0.1"); !strings.Contains(p.body, "+14155552671") {
			return errors.New("not yet")
		}
		return nil
	})
	for _, want := range []string{"Counted as <code>127.0.0.1</code>", "<code>127.0.0.0/24</code>", "<code>127.0.0.0/16</code>", "+14155552671"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("network page lacks %q", want)
		}
	}
	v6 := b.get("/console/network?ip=2001:db8:1:2:3::4")
	if !strings.Contains(v6.body, "Counted as <code>2001:db8:1:2::/64</code>") || !strings.Contains(v6.body, "2001:db8:1::/48") {
		t.Errorf("IPv6 network page:\n%.2000s", v6.body)
	}
}

func TestOverviewAndAuditSearch(t *testing.T) {
	r := newRig(t, false)
	apiSend(t, r, "+14155552671")
	apiSend(t, r, "+447400123456")
	b := r.browser(t)
	b.signIn(token)
	// The sends' final outcomes are written without the clients waiting
	// (otp.AuditLog.Finish): the overview counts them once they are in.
	var home page
	testenv.WaitUntil(t, 30*time.Second, "both texts on the overview", func() error {
		if home = b.get("/console"); !strings.Contains(home.body, `<dt>Texts sent</dt><dd>2</dd>`) {
			return errors.New("not yet")
		}
		return nil
	})
	for _, want := range []string{"Last hour", "Last day", `<dt>Texts sent</dt><dd>2</dd>`, "<td>GB</td>", "<svg class=\"chart\"", "<dd>0.10</dd>", "Audit spool"} {
		if !strings.Contains(home.body, want) {
			t.Errorf("overview lacks %q", want)
		}
	}

	s := b.get("/console/audit?search=1&phone=" + url.QueryEscape("07400 123456") + "&outcome=sent")
	_ = s
	gb := b.get("/console/audit?search=1&phone=" + url.QueryEscape("+44 7400 123456") + "&outcome=sent&kind=send")
	if testing.Verbose() {
		t.Logf("%s", home.body)
	}
	if !strings.Contains(gb.body, "1 rows") || !strings.Contains(gb.body, "+447400123456") || strings.Contains(gb.body, "+14155552671</a>") {
		t.Fatalf("search by phone:\n%.3000s", gb.body)
	}
	csvRes := b.get("/console/audit?search=1&ip=127.0.0.0/8&kind=send&format=csv")
	if ct := csvRes.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/csv") {
		t.Fatalf("CSV content type %q", ct)
	}
	recs, err := csv.NewReader(strings.NewReader(csvRes.body)).ReadAll()
	if err != nil || len(recs) != 3 || recs[0][0] != "id" || recs[0][5] != "phone_e164" {
		t.Fatalf("CSV %v %v", recs, err)
	}
	// Each text's segment count (both are one-segment English texts).
	if last := len(recs[0]) - 1; recs[0][last] != "segments" || recs[1][last] != "1" || recs[2][last] != "1" {
		t.Fatalf("CSV segments column: %v", recs)
	}
	if bad := b.get("/console/audit?search=1&from=yesterday"); bad.status != http.StatusBadRequest {
		t.Fatalf("bad time: %d", bad.status)
	}
	requireAdminRows(t, r.pool, "console.overview.get ok", "console.audit.search ok", "console.audit.export ok", "console.audit.search invalid_request")
}

// The console does not exist without an admin token.
func TestNoTokenNoConsole(t *testing.T) {
	h := console.New(slog.New(slog.NewTextHandler(io.Discard, nil)), console.Options{}, console.Deps{})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/console", nil))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("%d", rec.Code)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
