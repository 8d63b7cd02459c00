package e2e

import (
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"smsgw/internal/testenv"
)

// startDev runs smsgw -dev with config (TOML, may be empty) and waits until
// it answers.
func startDev(t *testing.T, config string) *process {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dev.toml")
	writeFile(t, path, config)
	return startFile(t, env{}, path, nil, "", "-dev")
}

// roomyIPWindows lets one address send far more than a person would, so a
// test sees the network pumping rules rather than the per-IP windows (or
// the country's budget of unverified texts, which nobody here verifies).
const roomyIPWindows = `
[[limits.ip]]
window = "1m"
max = 1000

[pumping.floors]
country = 1000
`

// sendSpread sends to n numbers in ranges of their own from loopback and
// returns the statuses, and the last answer.
func sendSpread(t *testing.T, p *process, from, n int) ([]int, response) {
	t.Helper()
	var statuses []int
	var last response
	for i := from; i < from+n; i++ {
		last = post(t, p.URL+"/v1/otp/send", fmt.Sprintf(`{"phone": %q}`, spreadPhone(i)), nil)
		statuses = append(statuses, last.Status)
	}
	return statuses, last
}

// TestDevPumpingShadow: in -dev a developer's own tests do not hold their
// address (pumping rules in shadow mode, as the banner says, with how to
// enforce them); a config that names a mode gets it.
func TestDevPumpingShadow(t *testing.T) {
	t.Parallel()
	t.Run("shadow by default", func(t *testing.T) {
		t.Parallel()
		p := startDev(t, roomyIPWindows)
		statuses, last := sendSpread(t, p, 0, 12)
		for i, s := range statuses {
			if s != 202 {
				t.Fatalf("send %d: %d %s", i, s, last.Raw)
			}
		}
		out := p.stderr.String()
		if !strings.Contains(out, "Pumping rules in SHADOW mode") || !strings.Contains(out, `mode = "enforce"`) {
			t.Fatalf("the banner does not say so:\n%s", out)
		}
		if !strings.Contains(out, "shadow:pumping:net_32") {
			t.Fatalf("the audit lines do not show what enforce would refuse:\n%s", out)
		}
	})
	t.Run("enforced when the config says so", func(t *testing.T) {
		t.Parallel()
		p := startDev(t, roomyIPWindows+"\n[pumping]\nmode = \"enforce\"\n")
		statuses, last := sendSpread(t, p, 0, 6)
		if statuses[4] != 202 || last.Status != 429 || last.ErrorField("rule") != "net_32" {
			t.Fatalf("statuses %v, last %s", statuses, last.Raw)
		}
		if out := p.stderr.String(); !strings.Contains(out, "Pumping rules ENFORCED") {
			t.Fatalf("banner:\n%s", out)
		}
	})
}

// TestFakeProviderOnlyWhenNamed: serving without -dev, a config naming no
// provider does not start; one naming "fake" starts with a warning in the
// log, on /readyz and on the console, and its outbox needs the admin token.
func TestFakeProviderOnlyWhenNamed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	t.Run("no provider named", func(t *testing.T) {
		path := writeConfig(t, e, "[sender]\ntimeout = \"10s\"\n")
		cmd := exec.Command(binary, "-config", path)
		cmd.Env = append(cmd.Environ(), "SMSGW_SECRET="+secret, "SMSGW_LISTEN="+testenv.FreeAddr(t), "SMSGW_REDIS_URL="+e.redisURL,
			"SMSGW_DATABASE_URL="+e.databaseURL)
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "sender.provider: no SMS provider is configured") {
			t.Fatalf("started without a provider: %v\n%s", err, out)
		}
	})
	t.Run("fake named", func(t *testing.T) {
		p := start(t, e, "") // writeConfig names the fake provider
		if out := p.stderr.String(); !strings.Contains(out, `"level":"WARN","msg":"sender: the fake provider is configured`) {
			t.Fatalf("no warning at start:\n%s", out)
		}
		r := get(t, p.URL+"/readyz")
		w, _ := r.Body["warnings"].([]any)
		if r.Status != 200 || len(w) != 1 || !strings.Contains(fmt.Sprint(w[0]), "fake provider") {
			t.Fatalf("readyz: %d %s", r.Status, r.Raw)
		}
		if r := post(t, p.URL+"/v1/otp/send", `{"phone": "+14155552671"}`, nil); r.Status != 202 {
			t.Fatalf("send: %d %s", r.Status, r.Raw)
		}
		if r := get(t, p.URL+"/v1/fake/messages?phone=%2B14155552671"); r.Status != 401 || r.ErrorCode() != "unauthorized" {
			t.Fatalf("outbox without the admin token: %d %s", r.Status, r.Raw)
		}
		if bodies := outboxBodies(t, p, "+14155552671"); len(bodies) != 1 {
			t.Fatalf("outbox with the admin token: %v", bodies)
		}
		if r := get(t, p.URL+"/console"); r.Status != 200 || strings.Contains(string(r.Raw), "fake provider") {
			t.Fatalf("the sign-in page tells anyone: %d %.500s", r.Status, r.Raw)
		}
		jar, _ := cookiejar.New(nil)
		browser := &http.Client{Jar: jar, Timeout: client.Timeout}
		res, err := browser.PostForm(p.URL+"/console/signin", url.Values{"token": {adminToken}})
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		req, _ := http.NewRequest(http.MethodGet, p.URL+"/console", nil)
		page := testenv.Do(t, browser, req)
		if page.Status != 200 || !strings.Contains(string(page.Raw), `class="warning" role="alert">sender: the fake provider is configured`) {
			t.Fatalf("console: %d %.2000s", page.Status, page.Raw)
		}
	})
}

// TestLiftClearsWhatMadeIt: lifting a net_32 hold through the admin API
// gives the address its budget back, and the /24 does not hold the next
// send in its place.
func TestLiftClearsWhatMadeIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := start(t, e, roomyIPWindows)
	next := 0
	for round := range 3 {
		statuses, last := sendSpread(t, p, next, 6)
		next += 6
		if statuses[4] != 202 || last.Status != 429 || last.ErrorField("rule") != "net_32" {
			t.Fatalf("round %d: statuses %v, last %s", round, statuses, last.Raw)
		}
		if r := adminCall(t, p, http.MethodDelete, "/v1/admin/pumping?rule=net_32&subject=127.0.0.1"); r.Status != 200 {
			t.Fatalf("lift: %d %s", r.Status, r.Raw)
		}
	}
}
