package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

const pumpingConfig = `
[server]
trusted_proxies = ["127.0.0.0/8"]

[pumping]
mode = %q
min_sends = 20
min_approval_ratio = 0.5
window = "1h"
quarantine = "10m"
`

// pump sends n texts to numbers of one UK range, each from its own client
// IP, verifying none, and returns the statuses.
func pump(t *testing.T, p *process, from, n int) []int {
	t.Helper()
	var out []int
	for i := from; i < from+n; i++ {
		r := post(t, p.URL+"/v1/otp/send", fmt.Sprintf(`{"phone": "+4474001%05d"}`, i),
			map[string]string{"X-Forwarded-For": fmt.Sprintf("203.0.%d.%d", i/200, i%200)})
		out = append(out, r.Status)
	}
	return out
}

// honest sends n texts to US numbers and verifies each one.
func honest(t *testing.T, p *process, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		phone := fmt.Sprintf("+1650253%04d", i)
		xff := map[string]string{"X-Forwarded-For": fmt.Sprintf("198.18.%d.%d", i/200, i%200)}
		if r := post(t, p.URL+"/v1/otp/send", fmt.Sprintf(`{"phone": %q}`, phone), xff); r.Status != 202 {
			t.Fatalf("honest send %d: %d %s", i, r.Status, r.Raw)
		}
		bodies := outboxBodies(t, p, phone)
		code := codeIn(bodies[len(bodies)-1])
		if r := post(t, p.URL+"/v1/otp/verify", fmt.Sprintf(`{"phone": %q, "code": %q}`, phone, code), xff); r.Status != 200 {
			t.Fatalf("honest verify %d: %d %s", i, r.Status, r.Raw)
		}
	}
}

func codeIn(body string) string {
	for _, f := range strings.Fields(body) {
		f = strings.TrimRight(f, ".")
		if len(f) == 6 && strings.Trim(f, "0123456789") == "" {
			return f
		}
	}
	return ""
}

func adminCall(t *testing.T, p *process, method, path string) response {
	t.Helper()
	req, _ := http.NewRequest(method, p.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	return roundTrip(t, req)
}

// TestPumpingGetsQuarantined: bots texting one premium-looking range of one
// country from many IPs, verifying nothing, get the country quarantined on
// every replica; a country whose codes are approved is untouched; lifting it
// on one replica lifts it everywhere.
func TestPumpingGetsQuarantined(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := fmt.Sprintf(pumpingConfig, "enforce")
	a, b := start(t, e, cfg), start(t, e, cfg)

	honest(t, a, 0, 25)
	statuses := pump(t, a, 0, 20)
	for i, st := range statuses {
		if st != 202 {
			t.Fatalf("pumped text %d answered %d before the guard tripped", i, st)
		}
	}
	// The 20th send trips it once the replica writes its gathered counts
	// (within 50 ms); then both replicas hold GB back.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(string(adminCall(t, a, http.MethodGet, "/v1/admin/quarantines").Raw), `"GB"`) {
		if time.Now().After(deadline) {
			t.Fatal("GB was never quarantined")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i, p := range []*process{a, b} {
		r := post(t, p.URL+"/v1/otp/send", fmt.Sprintf(`{"phone": "+44740020000%d"}`, i), map[string]string{"X-Forwarded-For": "192.0.2.200"})
		if r.Status != 429 || r.ErrorField("scope") != "country" || r.Header.Get("Retry-After") == "" {
			t.Fatalf("GB after the trip: %d %s %v", r.Status, r.Raw, r.Header)
		}
	}
	// The honest country still works.
	honest(t, b, 25, 3)

	q := adminCall(t, b, http.MethodGet, "/v1/admin/quarantines")
	var list []map[string]any
	if err := json.Unmarshal(q.Raw, &list); err != nil || len(list) != 1 || list[0]["country"] != "GB" || list[0]["sends"] != 20.0 || list[0]["approvals"] != 0.0 {
		t.Fatalf("quarantines: %d %s", q.Status, q.Raw)
	}
	if r := adminCall(t, b, http.MethodDelete, "/v1/admin/quarantines?country=GB"); r.Status != 200 {
		t.Fatalf("lift: %d %s", r.Status, r.Raw)
	}
	// The lift reaches the other replica over pub/sub (the deadline is sized
	// for a loaded machine running -race; it takes milliseconds).
	deadline = time.Now().Add(20 * time.Second)
	for st := pump(t, a, 100, 1); st[0] != 202; st = pump(t, a, 100, 1) {
		if time.Now().After(deadline) {
			t.Fatalf("GB on the other replica after the lift: %d", st[0])
		}
		time.Sleep(5 * time.Millisecond)
	}
	a.stop(t)
	b.stop(t)
	pumping := 0
	for _, r := range auditRows(t, e) {
		if r.Outcome == "rate_limited" && deref(r.Reason) == "pumping" {
			pumping++
		}
	}
	if pumping < 2 {
		t.Fatalf("%d audit rows with reason pumping, want at least the 2 refusals", pumping)
	}
}

func TestPumpingShadowModeChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := start(t, e, fmt.Sprintf(pumpingConfig, "shadow"))
	for i, st := range pump(t, p, 0, 30) {
		if st != 202 {
			t.Fatalf("shadow mode refused text %d: %d", i, st)
		}
	}
	const trip = `smsgw_pumping_trips_total{country="GB",mode="shadow"} 1`
	deadline := time.Now().Add(20 * time.Second)
	for m := get(t, p.URL+"/metrics"); !strings.Contains(string(m.Raw), trip); m = get(t, p.URL+"/metrics") {
		if time.Now().After(deadline) {
			t.Fatalf("shadow trip not counted:\n%s", grepLines(string(m.Raw), "pumping"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if q := adminCall(t, p, http.MethodGet, "/v1/admin/quarantines"); strings.TrimSpace(string(q.Raw)) != "[]" {
		t.Fatalf("shadow mode quarantined: %s", q.Raw)
	}
	if !strings.Contains(p.stderr.String(), "pumping") {
		t.Fatal("shadow mode logged nothing")
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestResetReachesEveryReplica: replicas answer a refused phone from memory;
// the support desk's reset on one replica lets the phone through on the
// other at once.
func TestResetReachesEveryReplica(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := start(t, e, ""), start(t, e, "")
	if r := post(t, a.URL+"/v1/otp/send", `{"phone": "+14155552671"}`, nil); r.Status != 202 {
		t.Fatalf("first: %d", r.Status)
	}
	for i := 0; i < 3; i++ { // the second and third come from b's refusal cache
		if r := post(t, b.URL+"/v1/otp/send", `{"phone": "+14155552671"}`, nil); r.Status != 429 {
			t.Fatalf("refusal %d: %d", i, r.Status)
		}
	}
	if r := adminCall(t, a, http.MethodDelete, "/v1/admin/limits?phone=%2B14155552671"); r.Status != 200 {
		t.Fatalf("reset: %d %s", r.Status, r.Raw)
	}
	if r := post(t, b.URL+"/v1/otp/send", `{"phone": "+14155552671"}`, nil); r.Status != 202 {
		t.Fatalf("b after a's reset: %d %s", r.Status, r.Raw)
	}
}
