package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"smsgw/internal/testenv"
)

// pumpingConfig trusts the test as a proxy, so each request can come from an
// address of its own; the pumping rules are as config.toml ships them.
const pumpingConfig = `
[server]
trusted_proxies = ["127.0.0.0/8"]
`

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

func adminJSON(t *testing.T, p *process, method, path, body string) response {
	t.Helper()
	req, _ := http.NewRequest(method, p.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	return roundTrip(t, req)
}

// realUser sends to a number of its own from an address of its own, reads
// the code from the fake outbox and verifies it: what a person does.
func realUser(t *testing.T, p *process, phone, from string) (sent, approved int) {
	t.Helper()
	xff := map[string]string{"X-Forwarded-For": from}
	r := post(t, p.URL+"/v1/otp/send", fmt.Sprintf(`{"phone": %q}`, phone), xff)
	if r.Status != 202 {
		t.Errorf("real user %s from %s: %d %s", phone, from, r.Status, r.Raw)
		return 0, 0
	}
	bodies := outboxBodies(t, p, phone)
	if len(bodies) == 0 {
		t.Errorf("real user %s: no text in the outbox", phone)
		return 1, 0
	}
	v := post(t, p.URL+"/v1/otp/verify", fmt.Sprintf(`{"phone": %q, "code": %q}`, phone, codeIn(bodies[len(bodies)-1])), xff)
	if v.Status != 200 {
		t.Errorf("real user %s verify: %d %s", phone, v.Status, v.Raw)
		return 1, 0
	}
	return 1, 1
}

// TestPumpingAttackHeldUsersServed is the product's reason to exist, in real
// time over HTTP with the shipped rules: bots text consecutive numbers of
// one Latvian range from a new IPv6 /64 per request (all in one /48), racing
// through two replicas, while real users in GB and the US, each from an
// address of its own, sign up and verify. The attack gets a handful of
// texts; every real user is served.
func TestPumpingAttackHeldUsersServed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := start(t, e, pumpingConfig), start(t, e, pumpingConfig)
	replicas := []*process{a, b}

	var attackSent, attackRefused atomic.Int64
	var badRefusal atomic.Value
	var wg sync.WaitGroup
	var next atomic.Int64
	for w := 0; w < 4; w++ {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > 400 {
					return
				}
				r := post(t, replicas[i%2].URL+"/v1/otp/send", fmt.Sprintf(`{"phone": "+3712600%04d"}`, i),
					map[string]string{"X-Forwarded-For": fmt.Sprintf("2a0b:6600:7:%x::9", i)})
				switch {
				case r.Status == 202:
					attackSent.Add(1)
				case r.Status == 429 && (r.ErrorField("scope") == "range" || r.ErrorField("scope") == "network") &&
					r.ErrorField("rule") != "" && r.Header.Get("Retry-After") != "":
					attackRefused.Add(1)
				default:
					badRefusal.Store(fmt.Sprintf("%d %s %v", r.Status, r.Raw, r.Header))
				}
			}
		})
	}

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
	users := 0
	for i := 0; i < 30; i++ {
		phone := fmt.Sprintf("+1650%07d", 2_000_000+rng.IntN(7_000_000))
		if i%2 == 1 {
			phone = fmt.Sprintf("+447400%06d", rng.IntN(1_000_000))
		}
		s, _ := realUser(t, replicas[i%2], phone, fmt.Sprintf("198.51.%d.%d", rng.IntN(256), 1+rng.IntN(250)))
		users += s
	}
	wg.Wait()
	if v := badRefusal.Load(); v != nil {
		t.Fatalf("an attack send got an answer that is not a pumping refusal: %s", v)
	}
	if users != 30 {
		t.Fatalf("%d of 30 real users were served", users)
	}
	// 400 consecutive numbers span 4 blocks of 100 and one of 1000: the
	// 1000-block's floor of 3 caps them.
	if n := attackSent.Load(); n > 3 || attackRefused.Load() != 400-n {
		t.Fatalf("the attack got %d texts, %d refusals; want at most 3", n, attackRefused.Load())
	}
	t.Logf("attack: %d of 400 texted; real users: 30 of 30 served", attackSent.Load())

	// The operators see the held range on either replica.
	r := adminCall(t, b, http.MethodGet, "/v1/admin/pumping")
	var view struct {
		Held []struct{ Rule, Subject string }
	}
	if err := json.Unmarshal(r.Raw, &view); err != nil || len(view.Held) == 0 {
		t.Fatalf("pumping view: %d %s", r.Status, r.Raw)
	}
	a.stop(t)
	b.stop(t)
	pumping := 0
	for _, row := range auditRows(t, e) {
		if row.Outcome == "rate_limited" && strings.HasPrefix(deref(row.Reason), "pumping:") {
			pumping += row.Count // past its subject's share a minute, on a rollup
		}
	}
	if pumping < 390 {
		t.Fatalf("%d refusals counted in audit rows name a pumping rule; want the ~397 refusals", pumping)
	}
}

// usAreaCodes are area codes over the whole US, for a spread attack.
var usAreaCodes = []int{201, 202, 203, 205, 206, 207, 208, 210, 212, 213, 214, 215, 216, 217, 218, 219, 224, 225, 228, 229,
	231, 234, 239, 240, 248, 251, 252, 253, 254, 256, 260, 262, 267, 269, 270, 276, 281, 301, 302, 303, 304, 305, 307,
	308, 309, 310, 312, 313, 314, 315, 316, 317, 318, 319, 320, 321, 323, 325, 330, 334, 336, 337, 339, 347, 351, 352,
	360, 361, 386, 401, 402, 404, 405, 406, 407, 408, 409, 410, 412, 413, 414, 415, 417, 419, 423, 425, 430, 432, 434,
	435, 440, 443, 469, 478, 479, 480, 484, 501, 502, 503, 504, 505, 507, 508, 509, 510, 512, 513, 515, 516, 517, 518,
	520, 530, 540, 541, 551, 559, 561, 562, 563, 567, 570, 571, 573, 574, 580, 585, 586, 601, 602, 603, 605, 606, 607,
	608, 609, 610, 612, 614, 615, 616, 617, 618, 619, 620, 623, 626, 630, 631, 636, 641, 646, 650, 651, 660, 661, 662,
	678, 701, 702, 703, 704, 706, 707, 708, 712, 713, 714, 715, 716, 717, 718, 719, 720, 724, 727, 731, 732, 734, 740,
	754, 757, 760, 763, 765, 770, 772, 773, 774, 775, 781, 785, 786, 801, 802, 803, 804, 805, 806, 808, 810, 812, 813,
	814, 815, 816, 817, 818, 828, 830, 831, 832, 843, 845, 847, 848, 850, 856, 857, 858, 859, 860, 862, 863, 864, 865,
	870, 901, 903, 904, 906, 907, 908, 909, 910, 912, 913, 914, 915, 916, 917, 918, 919, 920, 925, 928, 931, 936, 937,
	940, 941, 947, 949, 951, 952, 954, 956, 970, 971, 972, 973, 978, 979, 980, 985, 989}

// A fast spread over a whole country: bots text random numbers over ~270 US
// area codes, each request from a new IPv6 /48 of a new /32, as fast as
// two replicas answer, while real users of the same country sign up from
// the residential network where others verified before. No range fills and
// no network repeats: the country's texts with no sign of a real user are
// counted at once and hold the spread within a moment; the real users carry
// such a sign (their network's own approvals) and are served.
func TestPumpingSpreadOverACountryHeldUsersServed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := start(t, e, pumpingConfig), start(t, e, pumpingConfig)
	replicas := []*process{a, b}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 19))
	usPhone := func(r *rand.Rand) string {
		return fmt.Sprintf("+1%d%d%02d%04d", usAreaCodes[r.IntN(len(usAreaCodes))], 2+r.IntN(8), r.IntN(100), r.IntN(10_000))
	}
	home := func() string { return fmt.Sprintf("198.51.%d.%d", rng.IntN(256), 1+rng.IntN(250)) }
	// Earlier today, people on this residential network verified.
	for i := 0; i < 8; i++ {
		realUser(t, replicas[i%2], usPhone(rng), home())
	}

	const attempts = 4000
	var texted, refused, tried atomic.Int64
	var badRefusal atomic.Value
	var wg sync.WaitGroup
	started := time.Now()
	// The attack runs until attempts or the deadline: a loaded machine
	// running -race answers a third as fast, so the floor below is what
	// makes the 1% bound mean something, not a rate.
	deadline := started.Add(150 * time.Second)
	for w := 0; w < 64; w++ {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 91))
			for tried.Add(1) <= attempts && time.Now().Before(deadline) {
				i := r.Uint32()
				resp := post(t, replicas[w%2].URL+"/v1/otp/send", fmt.Sprintf(`{"phone": %q}`, usPhone(r)),
					map[string]string{"X-Forwarded-For": fmt.Sprintf("2a%02x:%x:%x::9", 1+i%250, i>>8&0xffff, r.IntN(0x10000))})
				switch {
				case resp.Status == 202:
					texted.Add(1)
				case resp.Status == 429 && resp.ErrorField("rule") != "" && resp.Header.Get("Retry-After") != "":
					refused.Add(1)
				default:
					badRefusal.Store(fmt.Sprintf("%d %s", resp.Status, resp.Raw))
				}
			}
		})
	}
	// Real users of the same country, new numbers, during the attack.
	served := 0
	for i := 0; i < 20; i++ {
		s, v := realUser(t, replicas[i%2], usPhone(rng), home())
		served += s * v
	}
	wg.Wait()
	took := time.Since(started)
	if v := badRefusal.Load(); v != nil {
		t.Fatalf("an attack send got an answer that is not a pumping refusal: %s", v)
	}
	n := texted.Load() + refused.Load()
	if n < attempts/4 {
		t.Fatalf("only %d attack attempts in %s", n, took)
	}
	if served != 20 {
		t.Fatalf("%d of 20 real users of the attacked country were served and verified", served)
	}
	if texted.Load()*100 > n {
		t.Fatalf("the spread got %d texts of %d attempts: over 1%%", texted.Load(), n)
	}
	t.Logf("spread: %d of %d attempts texted (%.0f a second); real users of the country: 20 of 20 served",
		texted.Load(), n, float64(n)/took.Seconds())

	// The operators see the country restricted, why, and what it served.
	r := adminCall(t, a, http.MethodGet, "/v1/admin/pumping")
	var view struct {
		Held []struct {
			Rule, Subject string
			Restricted    *struct {
				Over    string `json:"over"`
				Refused int64  `json:"refused"`
				Served  struct {
					Returning, Network, Challenge int64
				} `json:"served"`
			} `json:"restricted"`
		} `json:"held"`
	}
	if r.Status != 200 || json.Unmarshal(r.Raw, &view) != nil {
		t.Fatalf("GET /v1/admin/pumping: %d %s", r.Status, r.Raw)
	}
	found := false
	for _, h := range view.Held {
		if h.Rule == "country" && h.Subject == "US" && h.Restricted != nil {
			found = true
			if h.Restricted.Refused == 0 || (h.Restricted.Over != "window" && h.Restricted.Over != "hour") {
				t.Fatalf("the US is restricted with %+v; want its refusals counted and why", *h.Restricted)
			}
			t.Logf("restricted US: %+v", *h.Restricted)
		}
	}
	if !found {
		t.Fatalf("GET /v1/admin/pumping does not list the US as restricted: %s", r.Raw)
	}
}

// A held range is lifted by an operator on one replica, and the other
// serves it again within a moment; holds are answered from memory.
func TestPumpingLiftReachesEveryReplica(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := start(t, e, pumpingConfig), start(t, e, pumpingConfig)
	send := func(p *process, i int) response {
		return post(t, p.URL+"/v1/otp/send", fmt.Sprintf(`{"phone": "+4474001000%02d"}`, i),
			map[string]string{"X-Forwarded-For": fmt.Sprintf("203.0.%d.7", i)})
	}
	for i := 0; i < 2; i++ {
		if r := send(a, i); r.Status != 202 {
			t.Fatalf("send %d: %d %s", i, r.Status, r.Raw)
		}
	}
	for i, p := range []*process{a, b} {
		if r := send(p, 10+i); r.Status != 429 || r.ErrorField("rule") != "range_100" {
			t.Fatalf("third number of the block on replica %d: %d %s", i, r.Status, r.Raw)
		}
	}
	if r := adminCall(t, a, http.MethodDelete, "/v1/admin/pumping?rule=range_100&subject=%2B4474001000xx"); r.Status != 200 {
		t.Fatalf("lift: %d %s", r.Status, r.Raw)
	}
	testenv.WaitFor(t, 10*time.Second, "the lift on the other replica", func() bool { return send(b, 20).Status == 202 || send(b, 21).Status == 202 })
}

func TestPumpingShadowModeChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := start(t, e, pumpingConfig+"\n[pumping]\nmode = \"shadow\"\n")
	for i := 0; i < 20; i++ {
		r := post(t, p.URL+"/v1/otp/send", fmt.Sprintf(`{"phone": "+4474001000%02d"}`, i),
			map[string]string{"X-Forwarded-For": fmt.Sprintf("203.0.%d.7", i)})
		if r.Status != 202 {
			t.Fatalf("shadow mode refused text %d: %d %s", i, r.Status, r.Raw)
		}
	}
	m := get(t, p.URL+"/metrics")
	if !strings.Contains(string(m.Raw), `smsgw_pumping_refusals_total{country="GB",mode="shadow",rule="range_100"} 18`) {
		t.Fatalf("shadow refusals not counted:\n%s", grepLines(string(m.Raw), "pumping"))
	}
	p.stop(t)
	shadowed := 0
	for _, row := range auditRows(t, e) {
		if row.Outcome == "sent" && strings.Contains(deref(row.Reason), "shadow:pumping:range_100") {
			shadowed++
		}
	}
	if shadowed != 18 {
		t.Fatalf("%d sent rows say what shadow mode would have refused; want 18", shadowed)
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

// Overrides reach both replicas; an allowed range passes the pumping rules
// but never the windows; a blocked one is refused like a denied country;
// test numbers are never texted and consume nothing.
func TestOverridesAndTestNumbers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := pumpingConfig + `
[[test_numbers]]
phone = "+14155550100"
code = "246810"
`
	a, b := start(t, e, cfg), start(t, e, cfg)
	for _, body := range []string{
		`{"target": "+4474001000", "action": "allow", "note": "QA lab phones", "expires_in": 3600}`,
		`{"target": "+44740020", "action": "block", "note": "pumped in March", "expires_in": 3600}`,
	} {
		if r := adminJSON(t, a, http.MethodPost, "/v1/admin/overrides", body); r.Status != 200 {
			t.Fatalf("override: %d %s", r.Status, r.Raw)
		}
	}
	for _, bad := range []string{`{"target": "447400", "action": "allow", "expires_in": 60}`, `{"target": "+44", "action": "allow"}`, `[]`} {
		if r := adminJSON(t, a, http.MethodPost, "/v1/admin/overrides", bad); r.Status != 400 {
			t.Fatalf("bad override %s: %d %s", bad, r.Status, r.Raw)
		}
	}
	testenv.WaitFor(t, 10*time.Second, "the block on the other replica", func() bool {
		r := post(t, b.URL+"/v1/otp/send", `{"phone": "+447400200001"}`, map[string]string{"X-Forwarded-For": "203.0.113.1"})
		return r.Status == 422 && r.ErrorField("reason") == "override:block"
	})
	// The allowed block: ten numbers, far past range_100's floor of 2, from
	// one /24 past net_24's floor... but never past the per-IP windows.
	for i := 0; i < 5; i++ {
		r := post(t, b.URL+"/v1/otp/send", fmt.Sprintf(`{"phone": "+4474001000%02d"}`, i),
			map[string]string{"X-Forwarded-For": "203.0.113.50"})
		if r.Status != 202 {
			t.Fatalf("allowed number %d: %d %s", i, r.Status, r.Raw)
		}
	}
	if r := post(t, b.URL+"/v1/otp/send", `{"phone": "+447400100099"}`, map[string]string{"X-Forwarded-For": "203.0.113.50"}); r.Status != 429 || r.ErrorField("scope") != "ip" {
		t.Fatalf("the allowed range passed the IP window: %d %s", r.Status, r.Raw)
	}

	// Test numbers: 202 every time, no text, no window used, fixed code.
	for i := 0; i < 4; i++ {
		if r := post(t, a.URL+"/v1/otp/send", `{"phone": "(415) 555-0100"}`, map[string]string{"X-Forwarded-For": "203.0.113.60"}); r.Status != 202 {
			t.Fatalf("test number send %d: %d %s", i, r.Status, r.Raw)
		}
	}
	if bodies := outboxBodies(t, a, "+14155550100"); len(bodies) != 0 {
		t.Fatalf("a test number was texted: %v", bodies)
	}
	if r := post(t, a.URL+"/v1/otp/verify", `{"phone": "+14155550100", "code": "111111"}`, nil); r.Status != 422 {
		t.Fatalf("wrong test code: %d %s", r.Status, r.Raw)
	}
	if r := post(t, a.URL+"/v1/otp/verify", `{"phone": "+14155550100", "code": "246810"}`, nil); r.Status != 200 {
		t.Fatalf("test code: %d %s", r.Status, r.Raw)
	}

	list := adminCall(t, b, http.MethodGet, "/v1/admin/overrides")
	if !strings.Contains(string(list.Raw), "QA lab phones") {
		t.Fatalf("overrides: %s", list.Raw)
	}
	if r := adminCall(t, b, http.MethodDelete, "/v1/admin/overrides?target=%2B44740020"); r.Status != 200 {
		t.Fatalf("delete: %d %s", r.Status, r.Raw)
	}
	testenv.WaitFor(t, 10*time.Second, "the deletion on the other replica", func() bool {
		r := post(t, a.URL+"/v1/otp/send", `{"phone": "+447400200002"}`, map[string]string{"X-Forwarded-For": "203.0.113.2"})
		return r.Status == 202
	})
}

func TestInternationalNetworksRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := start(t, e, "")
	for _, phone := range []string{"+870773111111", "+8707 7311 1112"} {
		r := post(t, p.URL+"/v1/otp/send", fmt.Sprintf(`{"phone": %q}`, phone), nil)
		if r.Status != 422 || r.ErrorField("code") != "phone_not_allowed" || r.ErrorField("reason") != "country:001" {
			t.Fatalf("%s: %d %s", phone, r.Status, r.Raw)
		}
	}
	q := start(t, e, "[phone]\ndenied_countries = []\n")
	if r := post(t, q.URL+"/v1/otp/send", `{"phone": "+870773111111"}`, nil); r.Status != 202 {
		t.Fatalf("with 001 allowed: %d %s", r.Status, r.Raw)
	}
}

// With a bot challenge configured, a held range asks for one instead of
// refusing; a token the vendor accepts passes the pumping rules.
func TestChallengeInsteadOfRefusal(t *testing.T) {
	t.Parallel()
	var asked atomic.Int64
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		r.ParseForm()
		ok := r.PostForm.Get("secret") == "challenge-secret-1" && r.PostForm.Get("response") == "solved-by-a-person"
		fmt.Fprintf(w, `{"success": %v, "error-codes": []}`, ok)
	}))
	t.Cleanup(vendor.Close)
	e := newEnv(t)
	cfg := pumpingConfig + fmt.Sprintf(`
[pumping.challenge]
provider = "turnstile"
site_key = "0x4AAAAAAAtest"
verify_url = %q
`, vendor.URL)
	p := startWith(t, e, cfg, []string{"SMSGW_CHALLENGE_SECRET=challenge-secret-1"})
	send := func(i int, token string) response {
		body := fmt.Sprintf(`{"phone": "+4474001000%02d"}`, i)
		if token != "" {
			body = fmt.Sprintf(`{"phone": "+4474001000%02d", "challenge_token": %q}`, i, token)
		}
		return post(t, p.URL+"/v1/otp/send", body, map[string]string{"X-Forwarded-For": fmt.Sprintf("203.0.%d.7", i)})
	}
	for i := 0; i < 2; i++ {
		if r := send(i, ""); r.Status != 202 {
			t.Fatalf("send %d: %d %s", i, r.Status, r.Raw)
		}
	}
	r := send(10, "")
	if r.Status != 403 || r.ErrorField("code") != "challenge_required" || !strings.Contains(string(r.Raw), `"site_key":"0x4AAAAAAAtest"`) {
		t.Fatalf("held range without a token: %d %s", r.Status, r.Raw)
	}
	checkRuleHeaders(t, r, "range_100", "2", 24*time.Hour)
	if asked.Load() != 0 {
		t.Fatal("the vendor was asked without a token")
	}
	if r := send(11, "forged"); r.Status != 403 || r.ErrorField("code") != "challenge_required" {
		t.Fatalf("forged token: %d %s", r.Status, r.Raw)
	}
	if r := send(12, "solved-by-a-person"); r.Status != 202 {
		t.Fatalf("solved challenge: %d %s", r.Status, r.Raw)
	}
	p.stop(t)
	challenged := 0
	for _, row := range auditRows(t, e) {
		if deref(row.Reason) == "challenge_required:pumping:range_100" {
			if row.Outcome != "rate_limited" {
				t.Fatalf("a challenge is audited as %q; want rate_limited", row.Outcome)
			}
			challenged += row.Count
		}
	}
	if challenged != 2 {
		t.Fatalf("%d audit rows say a challenge was asked for; want 2", challenged)
	}
}
