package apptest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"smsgw/internal/app/apptest"
	"smsgw/internal/testenv"
	"smsgw/otp"
	"smsgw/otp/otptest"
)

// adminCall calls the admin API and checks the answer against the OpenAPI doc.
func adminCall(t *testing.T, s apptest.Service, method, path string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	testenv.CheckContract(t, req, res.StatusCode, res.Header, b)
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
	}
	return res.StatusCode, body
}

const adminToken = "admin-token-for-the-holds-test"

// A number refused by a held range, every window with room: GET
// /v1/admin/limits?phone= lists the hold next to the windows, a plain DELETE
// leaves it, DELETE ...&pumping=true lifts it (audited) and the number is
// texted again.
func TestLimitsShowAndLiftThePumpingHolds(t *testing.T) {
	ctx := context.Background()
	log := &otptest.AuditLog{}
	s := pumpingService(t, nil, apptest.Options{AdminToken: adminToken, AuditLog: log})
	for _, p := range []string{"+447400100000", "+447400100001"} {
		mustSend(t, s, p, "198.51.100.1")
	}
	const phone = "+447400100050"
	if _, err := s.Send(ctx, sendReq(phone, "198.51.100.2")); errCode(err) != otp.ERateLimited {
		t.Fatalf("a third number of the block: %v, want rate_limited by range_100", err)
	}
	holds := func(body map[string]any) []string {
		var out []string
		list, _ := body["pumping"].([]any)
		for _, h := range list {
			m := h.(map[string]any)
			out = append(out, m["rule"].(string)+" "+m["subject"].(string))
		}
		return out
	}
	status, body := adminCall(t, s, http.MethodGet, "/v1/admin/limits?phone=%2B447400100050")
	if got := holds(body); status != 200 || len(got) != 1 || got[0] != "range_100 +4474001000xx" {
		t.Fatalf("GET: %d, holds %v; want range_100 +4474001000xx", status, got)
	}
	if _, body = adminCall(t, s, http.MethodGet, "/v1/admin/limits?phone=%2B447400200050"); len(holds(body)) != 0 {
		t.Fatalf("a number of another block lists %v", holds(body))
	}
	if _, body = adminCall(t, s, http.MethodDelete, "/v1/admin/limits?phone=%2B447400100050"); len(holds(body)) != 1 {
		t.Fatalf("a plain DELETE lifted the hold: %v", holds(body))
	}
	if status, _ = adminCall(t, s, http.MethodDelete, "/v1/admin/limits?phone=%2B447400100050&pumping=maybe"); status != 400 {
		t.Fatalf("pumping=maybe: %d, want 400", status)
	}
	if status, body = adminCall(t, s, http.MethodDelete, "/v1/admin/limits?phone=%2B447400100050&pumping=true"); status != 200 || len(holds(body)) != 0 {
		t.Fatalf("DELETE &pumping=true: %d, holds left %v", status, holds(body))
	}
	if _, err := s.Send(ctx, sendReq(phone, "198.51.100.2")); err != nil {
		t.Fatalf("after the lift: %v", err)
	}
	lifts := 0
	for _, e := range append(log.Recorded(), append(log.Finished(), log.Noted()...)...) {
		if e.Kind == "admin" && strings.HasPrefix(e.Reason, "pumping.lift:range_100:+4474001000xx") && e.Phone == phone {
			lifts++
		}
	}
	if lifts != 1 {
		t.Fatalf("%d audited lifts of range_100 for %s, want 1", lifts, phone)
	}
}
