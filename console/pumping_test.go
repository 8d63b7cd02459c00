package console_test

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"smsgw/console"
)

// memPumping stands in for the pumping defence, whose package adapts to
// console.Pumping when it is wired; it keeps what the console asks of it.
type memPumping struct {
	mu        sync.Mutex
	holds     []console.Hold
	budgets   []console.Budget
	overrides map[string]console.Override
}

func (m *memPumping) Holds(context.Context) ([]console.Hold, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]console.Hold(nil), m.holds...), nil
}

func (m *memPumping) LiftHold(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, h := range m.holds {
		if h.Key == key {
			m.holds = append(m.holds[:i], m.holds[i+1:]...)
			break
		}
	}
	return nil
}

func (m *memPumping) Budgets(context.Context, int) ([]console.Budget, error) { return m.budgets, nil }

func (m *memPumping) Overrides(context.Context) ([]console.Override, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []console.Override
	for _, o := range m.overrides {
		out = append(out, o)
	}
	return out, nil
}

func (m *memPumping) AddOverride(_ context.Context, o console.Override) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.overrides[o.Target] = o
	return nil
}

func (m *memPumping) LiftOverride(_ context.Context, target string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.overrides, target)
	return nil
}

func TestPumpingPages(t *testing.T) {
	pump := &memPumping{
		holds:     []console.Hold{{Key: "range:+23324", Rule: "range", Remaining: 42 * time.Minute, Detail: "412 texts, 3 approved"}},
		budgets:   []console.Budget{{Key: "net:127.0.0.0/24", Rule: "network", Used: 40, Limit: 50, Window: time.Hour}},
		overrides: map[string]console.Override{},
	}
	r := newRigWith(t, false, pump)
	b := r.browser(t)
	home := b.signIn(token)
	if !strings.Contains(home.body, "range:+23324") || !strings.Contains(home.body, "412 texts, 3 approved") {
		t.Fatalf("overview lacks the hold")
	}
	net := b.get("/console/network?ip=127.0.0.9")
	if !strings.Contains(net.body, "network: 40 of 50 per 1 h") {
		t.Errorf("network page lacks the /24's budget:\n%.3000s", net.body)
	}

	ph := b.get("/console/phone?phone=" + url.QueryEscape("(415) 555-2671"))
	saved := b.post("/console/pumping/overrides", url.Values{"csrf": {csrf(t, ph)}, "target": {"+14155552671"},
		"back_phone": {"+14155552671"}, "action": {"block"}, "expires": {"24h"}, "note": {"ticket 4711"}})
	if !strings.Contains(saved.body, "Override saved") || !strings.Contains(saved.body, "ticket 4711") || !strings.Contains(saved.url, "/console/phone") {
		t.Fatalf("after block: %s\n%.3000s", saved.url, saved.body)
	}
	o := pump.overrides["+14155552671"]
	if o.Action != "block" || o.Expires.Sub(r.clock.Now()) != 24*time.Hour {
		t.Fatalf("override %+v", o)
	}

	page := b.get("/console/pumping")
	tests := []struct {
		name string
		form url.Values
		want string
	}{
		{"prefix override", url.Values{"target": {"+23324"}, "action": {"allow"}, "expires": {"1h"}}, "Override saved"},
		{"bad action", url.Values{"target": {"+23324"}, "action": {"maybe"}, "expires": {"1h"}}, "allow or block"},
		{"bad target", url.Values{"target": {"ghana"}, "action": {"block"}, "expires": {"1h"}}, "prefix such as"},
		{"too long", url.Values{"target": {"+23324"}, "action": {"block"}, "expires": {"9000h"}}, "90 days"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.form.Set("csrf", csrf(t, page))
			p := b.post("/console/pumping/overrides", tt.form)
			if !strings.Contains(p.body, tt.want) {
				t.Fatalf("%d, want %q:\n%.2000s", p.status, tt.want, p.body)
			}
		})
	}
	if len(pump.overrides) != 2 {
		t.Fatalf("overrides %v", pump.overrides)
	}
	lifted := b.post("/console/pumping/overrides/lift", url.Values{"csrf": {csrf(t, page)}, "target": {"+23324"}})
	if !strings.Contains(lifted.body, "Lifted") || len(pump.overrides) != 1 {
		t.Fatalf("lift override: %v", pump.overrides)
	}
	b.post("/console/pumping/holds/lift", url.Values{"csrf": {csrf(t, page)}, "key": {"range:+23324"}})
	if len(pump.holds) != 0 {
		t.Fatalf("holds %v", pump.holds)
	}
	rows := strings.Join(adminRows(t, r.pool), "\n")
	for _, want := range []string{"console.pumping.override.add:block:+14155552671 ok", "console.pumping.override.add:maybe:+23324 invalid_request",
		"console.pumping.override.lift:+23324 ok", "console.pumping.hold.lift:range:+23324 ok", "console.pumping.get ok"} {
		if !strings.Contains(rows, want) {
			t.Errorf("audit lacks %q:\n%s", want, rows)
		}
	}
}

func TestPumpingOff(t *testing.T) {
	r := newRig(t, false)
	b := r.browser(t)
	home := b.signIn(token)
	if p := b.get("/console/pumping"); !strings.Contains(p.body, "The pumping defence is off") {
		t.Fatalf("%.2000s", p.body)
	}
	p := b.post("/console/pumping/overrides", url.Values{"csrf": {csrf(t, home)}, "target": {"+23324"}, "action": {"block"}, "expires": {"1h"}})
	if p.status != 404 {
		t.Fatalf("override with pumping off: %d", p.status)
	}
}
