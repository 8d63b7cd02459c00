package console_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"smsgw/internal/testenv"
	"smsgw/pumping"
)

// pumpingRig runs the shipped pumping rules, enforced.
func pumpingRig(t *testing.T) *rig {
	t.Helper()
	cfg := pumping.DefaultConfig()
	cfg.Mode = "enforce"
	return newRigWith(t, false, &cfg)
}

// TestPumpingPages: a number range pumped past its budget is held; the
// console shows the hold and lifts it, and sets and lifts overrides, all
// through the real pumping guard on Redis.
func TestPumpingPages(t *testing.T) {
	r := pumpingRig(t)
	// Three unverified numbers of one block of 100, from three addresses:
	// the shipped range_100 budget is 2.
	var last int
	for i, p := range []string{"+233241234501", "+233241234502", "+233241234503"} {
		last = sendFrom(t, r, p, "198.51.100."+string(rune('1'+i)))
	}
	if last != http.StatusTooManyRequests {
		t.Fatalf("third number of the block: %d, want 429", last)
	}
	b := r.browser(t)
	home := b.signIn(token)
	if !strings.Contains(home.body, "+2332412345") || !strings.Contains(home.body, "range_100") {
		t.Fatalf("overview lacks the hold:\n%.4000s", home.body)
	}
	page := b.get("/console/pumping")
	if !strings.Contains(page.body, `name="rule" value="range_100"`) {
		t.Fatalf("pumping page:\n%.4000s", page.body)
	}
	subject := regexpFind(t, page.body, `name="rule" value="range_100"><input type="hidden" name="subject" value="([^"]+)"`)
	lifted := b.post("/console/pumping/lift", url.Values{"csrf": {csrf(t, page)}, "rule": {"range_100"}, "subject": {subject}})
	if !strings.Contains(lifted.body, "Lifted") || strings.Contains(lifted.body, `name="rule" value="range_100"`) {
		t.Fatalf("after lifting:\n%.4000s", lifted.body)
	}
	// Lifted on the guard itself: the next number of the block gets its text.
	if st := sendFrom(t, r, "+233241234504", "198.51.100.9"); st != http.StatusAccepted {
		t.Fatalf("after the lift a send to the block answered %d", st)
	}

	ph := b.get("/console/phone?phone=" + url.QueryEscape("(415) 555-2671"))
	saved := b.post("/console/overrides", url.Values{"csrf": {csrf(t, ph)}, "target": {"+14155552671"},
		"back_phone": {"+14155552671"}, "action": {"block"}, "expires": {"24h"}, "note": {"ticket 4711"}})
	if !strings.Contains(saved.body, "Override saved") || !strings.Contains(saved.body, "ticket 4711") || !strings.Contains(saved.url, "/console/phone") {
		t.Fatalf("after block: %s\n%.3000s", saved.url, saved.body)
	}
	list, err := r.svc.Guard.ListOverrides(t.Context())
	if err != nil || len(list) != 1 || list[0].Action != "block" || list[0].ExpiresAt.Sub(r.clock.Now()) > 24*time.Hour+time.Second {
		t.Fatalf("overrides %+v %v", list, err)
	}
	if st := sendFrom(t, r, "+14155552671", "198.51.100.20"); st != http.StatusUnprocessableEntity {
		t.Fatalf("a blocked number: %d, want 422", st)
	}

	tests := []struct {
		name string
		form url.Values
		want string
	}{
		{"range override", url.Values{"target": {"+23324"}, "action": {"allow"}, "expires": {"1h"}}, "Override saved"},
		{"bad action", url.Values{"target": {"+23324"}, "action": {"maybe"}, "expires": {"1h"}}, "allow or block"},
		{"bad target", url.Values{"target": {"ghana"}, "action": {"block"}, "expires": {"1h"}}, "range such as"},
		{"too long", url.Values{"target": {"+23324"}, "action": {"block"}, "expires": {"9000h"}}, "90 days"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.form.Set("csrf", csrf(t, page))
			p := b.post("/console/overrides", tt.form)
			if !strings.Contains(p.body, tt.want) {
				t.Fatalf("%d, want %q:\n%.2000s", p.status, tt.want, p.body)
			}
		})
	}
	if list, _ := r.svc.Guard.ListOverrides(t.Context()); len(list) != 2 {
		t.Fatalf("overrides %+v", list)
	}
	gone := b.post("/console/overrides/delete", url.Values{"csrf": {csrf(t, page)}, "target": {"+14155552671"}})
	if !strings.Contains(gone.body, "Lifted") {
		t.Fatalf("lift override:\n%.2000s", gone.body)
	}
	if list, _ := r.svc.Guard.ListOverrides(t.Context()); len(list) != 1 || list[0].Target != "+23324" {
		t.Fatalf("overrides after the lift %+v", list)
	}
	requireAdminRows(t, r.pool, "console.override.set:block:+14155552671 ok", "console.override.set:maybe:+23324 invalid_request",
		"console.override.delete:+14155552671 ok", "console.pumping.lift:range_100:"+subject+" ok", "console.pumping.get ok")
}

func TestPumpingOff(t *testing.T) {
	r := newRig(t, false)
	b := r.browser(t)
	home := b.signIn(token)
	if p := b.get("/console/pumping"); !strings.Contains(p.body, "The pumping defence is off") {
		t.Fatalf("%.2000s", p.body)
	}
	p := b.post("/console/overrides", url.Values{"csrf": {csrf(t, home)}, "target": {"+23324"}, "action": {"block"}, "expires": {"1h"}})
	if p.status != 404 {
		t.Fatalf("override with pumping off: %d", p.status)
	}
}

// sendPast sends floor+1 texts, text i to and from what to(i) says:
// every one accepted but the last, refused (429) over the floor named over.
// what says where the texts come from in a failure.
func sendPast(t *testing.T, r *rig, floor int, what, over string, to func(i int) (phone, from string)) {
	t.Helper()
	for i := 0; i <= floor; i++ {
		phone, from := to(i)
		st := sendFrom(t, r, phone, from)
		if want := http.StatusAccepted; i == floor {
			if st != http.StatusTooManyRequests {
				t.Fatalf("text %d%s over %s: %d, want 429", i, what, over, st)
			}
		} else if st != want {
			t.Fatalf("text %d%s: %d", i, what, st)
		}
	}
}

// TestPumpingRestrictedCountry: texts to a country that nobody verifies run
// over its budget; the pumping page says since when, why, and how many
// sends were refused and served.
func TestPumpingRestrictedCountry(t *testing.T) {
	r := pumpingRig(t)
	floor := pumping.DefaultFloors()[pumping.RuleCountry]
	// Each in a block of 100,000 of its own, from a /16 of its own, spread
	// over three operators (none reaches its own floor): only the country
	// counts them all.
	sendPast(t, r, floor, "", "the country's floor", func(i int) (string, string) {
		return fmt.Sprintf("+233%s%02d34567", ghanaOperators[i%3], 10+i), fmt.Sprintf("198.%d.1.1", 10+i)
	})
	b := r.browser(t)
	b.signIn(token)
	page := b.get("/console/pumping")
	for _, want := range []string{"Restricted countries", "<code>GH</code>", fmt.Sprintf("%d unverified, %d earned (window)", floor+1, floor),
		`<td class="num">1</td><td class="num">0</td><td class="num">0</td><td class="num">0</td>`} {
		if !strings.Contains(page.body, want) {
			t.Fatalf("pumping page lacks %q:\n%.6000s", want, page.body)
		}
	}
}

// ghanaOperators are prefixes of three Ghanaian operators (MTN, Vodafone,
// AirtelTigo in libphonenumber's prefix data).
var ghanaOperators = []string{"24", "20", "26"}

// TestPumpingRestrictedOperator: texts to one operator's ranges that nobody
// verifies run over its budget; the pumping page lists the operator, not
// its country, and the country's other operators are served.
func TestPumpingRestrictedOperator(t *testing.T) {
	r := pumpingRig(t)
	floor := pumping.DefaultFloors()[pumping.RuleOperator]
	sendPast(t, r, floor, "", "the operator's floor", func(i int) (string, string) {
		return fmt.Sprintf("+23324%02d34567", 10+i), fmt.Sprintf("198.%d.1.1", 10+i)
	})
	if st := sendFrom(t, r, "+233201234567", "198.99.1.1"); st != http.StatusAccepted {
		t.Fatalf("a user of another Ghanaian operator: %d, want 202", st)
	}
	b := r.browser(t)
	b.signIn(token)
	page := b.get("/console/pumping")
	for _, want := range []string{"Restricted operators", "<code>GH/MTN</code>", fmt.Sprintf("%d unverified, %d earned (window)", floor+1, floor)} {
		if !strings.Contains(page.body, want) {
			t.Fatalf("pumping page lacks %q:\n%.6000s", want, page.body)
		}
	}
	if strings.Contains(page.body, "Restricted countries") {
		t.Fatalf("the country is restricted too:\n%.6000s", page.body)
	}
	subject := regexpFind(t, page.body, `name="rule" value="operator"><input type="hidden" name="subject" value="([^"]+)"`)
	lifted := b.post("/console/pumping/lift", url.Values{"csrf": {csrf(t, page)}, "rule": {"operator"}, "subject": {subject}})
	if !strings.Contains(lifted.body, "Lifted") || strings.Contains(lifted.body, "Restricted operators") {
		t.Fatalf("after lifting %s:\n%.4000s", subject, lifted.body)
	}
	if st := sendFrom(t, r, "+233249934567", "198.98.1.1"); st != http.StatusAccepted {
		t.Fatalf("after the lift a send to the operator answered %d", st)
	}
}

// TestPumpingRestrictedAbroad: a spread over US numbers from networks whose
// users verify British codes restricts only the sends from networks known
// abroad; the pumping page says so, and the country's own new users are
// served.
func TestPumpingRestrictedAbroad(t *testing.T) {
	r := pumpingRig(t)
	for i, p := range []string{"+447400123456", "+447400654321"} {
		from := fmt.Sprintf("203.0.%d.1", i+1)
		if st := sendFrom(t, r, p, from); st != http.StatusAccepted {
			t.Fatalf("send %s: %d", p, st)
		}
		msgs := r.svc.Outbox.Messages(p)
		code := regexp.MustCompile(`\d{6}`).FindString(msgs[len(msgs)-1].Body)
		req, _ := http.NewRequest(http.MethodPost, r.URL+"/v1/otp/verify", strings.NewReader(`{"phone":"`+p+`","code":"`+code+`"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Forwarded-For", from)
		if res := testenv.Do(t, http.DefaultClient, req); res.Status != http.StatusOK {
			t.Fatalf("verify %s: %d %s", p, res.Status, res.Raw)
		}
	}
	abroad := pumping.DefaultFloors()[pumping.RuleCountry] / 3 // the ledger of networks known abroad starts from a third
	// Each in a block of 100,000 of its own, from a /24 of its own in the
	// /16 whose users verify British codes.
	sendPast(t, r, abroad, " from abroad", "the ledger's floor", func(i int) (string, string) {
		return fmt.Sprintf("+1650%d04567", 20+i), fmt.Sprintf("203.0.%d.1", 10+i)
	})
	// The ledger is restricted at its third refusal within the hour.
	for i := range 2 {
		if st := sendFrom(t, r, fmt.Sprintf("+1650%d04567", 40+i), fmt.Sprintf("203.0.%d.1", 40+i)); st != http.StatusTooManyRequests {
			t.Fatalf("refusal %d from abroad: %d, want 429", i+2, st)
		}
	}
	if st := sendFrom(t, r, "+14155550123", "198.18.0.1"); st != http.StatusAccepted {
		t.Fatalf("a new American user from an unknown network: %d, want 202", st)
	}
	b := r.browser(t)
	b.signIn(token)
	page := b.get("/console/pumping")
	for _, want := range []string{"Restricted countries", "<code>US</code>",
		fmt.Sprintf("only sends from networks known abroad: %d unverified, %d earned (window)", abroad+1, abroad)} {
		if !strings.Contains(page.body, want) {
			t.Fatalf("pumping page lacks %q:\n%.6000s", want, page.body)
		}
	}
}

// TestResetLimitsLiftsThePumpingHolds: a number refused by a held range has
// room in every window; its page lists the hold beside "Reset limits" with
// a box, ticked by default, that lifts it too (audited), after which the
// number is texted.
func TestResetLimitsLiftsThePumpingHolds(t *testing.T) {
	r := pumpingRig(t)
	for i, p := range []string{"+233241234601", "+233241234602", "+233241234603"} {
		sendFrom(t, r, p, "198.51.100."+string(rune('1'+i)))
	}
	b := r.browser(t)
	b.signIn(token)
	ph := b.get("/console/phone?phone=" + url.QueryEscape("+233241234603"))
	if !strings.Contains(ph.body, `name="pumping" value="true" checked`) || !strings.Contains(ph.body, "range_100 <code>+2332412346xx</code>") {
		t.Fatalf("the phone page offers no lift of its range's hold:\n%.4000s", ph.body)
	}
	plain := b.post("/console/phone/reset", url.Values{"csrf": {csrf(t, ph)}, "phone": {"+233241234603"}})
	if !strings.Contains(plain.body, "Limits reset: every window") || !strings.Contains(plain.body, `name="pumping" value="true"`) {
		t.Fatalf("a reset without the box ticked:\n%.4000s", plain.body)
	}
	done := b.post("/console/phone/reset", url.Values{"csrf": {csrf(t, ph)}, "phone": {"+233241234603"}, "pumping": {"true"}})
	if !strings.Contains(done.body, "pumping holds lifted") || strings.Contains(done.body, `name="pumping"`) {
		t.Fatalf("after the reset with the box ticked:\n%.4000s", done.body)
	}
	if st := sendFrom(t, r, "+233241234603", "198.51.100.9"); st != http.StatusAccepted {
		t.Fatalf("after the lift the number answered %d", st)
	}
	requireAdminRows(t, r.pool, "console.limits.delete:pumping.lift:range_100:+2332412346xx ok")
}
