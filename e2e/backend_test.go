package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"smsgw/internal/testenv"
)

// areaCodes are US area codes: numbers in them lie in distinct number
// ranges, so the pumping range rules never hold a test's sends.
var areaCodes = []int{212, 213, 214, 215, 216, 217, 218, 219, 224, 225, 228, 229, 231, 234, 239, 240, 248, 251, 252,
	253, 254, 256, 260, 262, 267, 269, 270, 272, 276, 281, 301, 302, 303, 304, 305, 307, 308, 309, 310, 312, 313}

// spreadPhone is the i-th number in a range of its own.
func spreadPhone(i int) string { return fmt.Sprintf("+1%d5550123", areaCodes[i]) }

// backendKey is the API key of the e2e tests' signup backend, which may
// forward its users' addresses.
const backendKey = "e2e-backend-key-0123456789abcdef"

// sha256Hex is how [[api.keys]] names a key: its SHA-256 in hex.
func sha256Hex(key string) string { s := sha256.Sum256([]byte(key)); return hex.EncodeToString(s[:]) }

// backendConfig configures backendKey with forward_client_ip and a browser
// key without it. Its users never verify: the country and /16 budgets are
// roomy, so what is tested is which address the windows and network rules
// count, not the country's unverified texts.
func backendConfig() string {
	digest := sha256Hex
	return fmt.Sprintf(`
[pumping.floors]
country = 1000
net_16 = 1000

[[api.keys]]
name = "signup-backend"
sha256 = %q
enabled = true
forward_client_ip = true

[[api.keys]]
name = "web-signup"
sha256 = %q
enabled = true
`, digest(backendKey), digest("e2e-web-key-0123456789abcdef"))
}

// TestBackendForwardsClientIP: a backend calling smsgw for its users passes
// each user's address; every limit and pumping rule counts that address,
// and the audit row names it. A browser key's client_ip is refused.
func TestBackendForwardsClientIP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := start(t, e, backendConfig())
	backend := map[string]string{"Authorization": "Bearer " + backendKey}

	// 30 users in 30 /24s behind one backend address: far past what one
	// address may send (5 a minute; net_32 holds after 5 unverified).
	for i := range 30 {
		ip := fmt.Sprintf("198.51.%d.7", 100+i)
		r := post(t, p.URL+"/v1/otp/send", fmt.Sprintf(`{"phone": %q, "client_ip": %q}`, spreadPhone(i), ip), backend)
		if r.Status != 202 {
			t.Fatalf("user %d: %d %s", i, r.Status, r.Raw)
		}
	}
	// One user's address is still held to its own limits.
	var last response
	for i := range 6 {
		last = post(t, p.URL+"/v1/otp/send", fmt.Sprintf(`{"phone": %q, "client_ip": "203.0.113.9"}`, spreadPhone(30+i)), backend)
	}
	if last.Status != 429 || last.ErrorField("scope") != "ip" {
		t.Fatalf("sixth send of one user: %d %s", last.Status, last.Raw)
	}
	if r := post(t, p.URL+"/v1/otp/send", `{"phone": "+14155550123", "client_ip": "203.0.113.9"}`,
		map[string]string{"Authorization": "Bearer e2e-web-key-0123456789abcdef"}); r.Status != 400 || r.ErrorCode() != "invalid_request" {
		t.Fatalf("browser key with client_ip: %d %s", r.Status, r.Raw)
	}
	testenv.WaitFor(t, 30*time.Second, "audit rows", func() bool { return len(auditRows(t, e)) >= 37 })
	ips := map[string]int{}
	for _, row := range auditRows(t, e) {
		ips[deref(row.ClientIP)]++
	}
	if ips["198.51.100.7"] != 1 || ips["198.51.129.7"] != 1 || ips["203.0.113.9"] != 6 || ips["127.0.0.1"] != 1 {
		t.Fatalf("audit client_ip: %v", ips)
	}
}

// TestFanoutWarning: one address sending for many distinct numbers (a
// backend forwarding nothing) is logged with what to do, and counted.
func TestFanoutWarning(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := start(t, e, "")
	for i := range 20 {
		post(t, p.URL+"/v1/otp/send", fmt.Sprintf(`{"phone": %q}`, spreadPhone(i)), nil)
	}
	testenv.WaitFor(t, 30*time.Second, "the fanout metric", func() bool {
		return strings.Contains(metricsOf(t, p), "smsgw_client_ip_fanout_total 1")
	})
	if out := p.stderr.String(); !strings.Contains(out, "forward_client_ip") || !strings.Contains(out, `"client_ip":"127.0.0.1/32"`) {
		t.Fatalf("no warning in the log:\n%s", out)
	}
}
