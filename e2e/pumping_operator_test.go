package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// A spread over one Nigerian operator's ranges (Glo) restricts that
// operator, not Nigeria: its sends answer 429 scope "operator", another
// operator's users are served, the admin API lists and lifts it, and the
// metrics count it per operator.
func TestPumpingOperatorRestrictedAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := start(t, e, pumpingConfig)
	send := func(phone string, i int) response {
		return post(t, p.URL+"/v1/otp/send", fmt.Sprintf(`{"phone": %q}`, phone),
			map[string]string{"X-Forwarded-For": fmt.Sprintf("198.%d.1.1", 10+i)})
	}
	// Each in a block of 100,000 of its own, from a /16 of its own; Glo's
	// floor is 5.
	for i := range 5 {
		if r := send(fmt.Sprintf("+234805%02d34567", 10+i), i); r.Status != 202 {
			t.Fatalf("Glo send %d: %d %s", i, r.Status, r.Raw)
		}
	}
	r := send("+2348079934567", 50)
	if r.Status != 429 || r.ErrorField("scope") != "operator" || r.ErrorField("rule") != "operator" {
		t.Fatalf("a Glo send over its operator's budget: %d %s", r.Status, r.Raw)
	}
	if r := send("+2348039934567", 51); r.Status != 202 {
		t.Fatalf("an MTN user while Glo is restricted: %d %s", r.Status, r.Raw)
	}
	list := adminCall(t, p, http.MethodGet, "/v1/admin/pumping")
	var view struct {
		Held []struct {
			Rule, Subject string
			Restricted    *struct {
				Refused int64 `json:"refused"`
			} `json:"restricted"`
		} `json:"held"`
	}
	if list.Status != 200 || json.Unmarshal(list.Raw, &view) != nil {
		t.Fatalf("GET /v1/admin/pumping: %d %s", list.Status, list.Raw)
	}
	found := false
	for _, h := range view.Held {
		if h.Rule == "country" {
			t.Fatalf("Nigeria is held: %s", list.Raw)
		}
		found = found || (h.Rule == "operator" && h.Subject == "NG/Glo" && h.Restricted != nil && h.Restricted.Refused == 1)
	}
	if !found {
		t.Fatalf("GET /v1/admin/pumping does not list NG/Glo restricted with one refusal: %s", list.Raw)
	}
	m := get(t, p.URL+"/metrics")
	if !strings.Contains(string(m.Raw), `smsgw_pumping_operator_refusals_total{country="NG",mode="enforce",operator="Glo"} 1`) {
		t.Fatalf("the operator's refusal is not counted:\n%s", grepLines(string(m.Raw), "operator"))
	}
	if r := adminCall(t, p, http.MethodDelete, "/v1/admin/pumping?rule=operator&subject=NG%2FGlo"); r.Status != 200 {
		t.Fatalf("lift: %d %s", r.Status, r.Raw)
	}
	if r := send("+2348159934567", 52); r.Status != 202 {
		t.Fatalf("a Glo send after the lift: %d %s", r.Status, r.Raw)
	}
}
