package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"smsgw/internal/redistopo"
	"smsgw/internal/testenv"
)

const keyBackend = "sk-limitkeys-backend-0123456789"

// limitKeysConfig: a backend forwarding its users' addresses, user_id at 5
// an hour, no pumping rules (the racers send unverified texts).
func limitKeysConfig() string {
	return topologyConfig + fmt.Sprintf(`
[[api.keys]]
name = "signup-backend"
sha256 = %q
enabled = true
forward_client_ip = true

[[limits.key]]
name = "user_id"
window = "1h"
max = 5
`, sha256Hex(keyBackend))
}

// TestLimitKeysRace: 40 racing sends with one user_id, each from its own
// address to its own number, over three replicas on one Redis and over two
// on a Cluster, admit exactly the key's max; refused texts give it back.
func TestLimitKeysRace(t *testing.T) {
	t.Run("three replicas, one Redis", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		cfg := limitKeysConfig()
		checkLimitKeyRace(t, []*process{start(t, e, cfg), start(t, e, cfg), start(t, e, cfg)}, 0)
	})
	t.Run("Redis Cluster", func(t *testing.T) {
		t.Parallel()
		c := redistopo.StartCluster(t, 3)
		e := env{redisURL: "redis://127.0.0.1:1/0", keyPrefix: "e2e:" + testenv.Unique() + ":",
			redisTOML: "timeout = \"2s\"\ncluster_addrs = " + tomlList(c.Addrs()), databaseURL: testenv.Database(t)}
		cfg := limitKeysConfig()
		checkLimitKeyRace(t, []*process{start(t, e, cfg), start(t, e, cfg)}, 1)
	})
}

func checkLimitKeyRace(t *testing.T, procs []*process, net int) {
	auth := map[string]string{"Authorization": "Bearer " + keyBackend}
	sendFor := func(p *process, user, phone, ip string) response {
		return post(t, p.URL+"/v1/otp/send", fmt.Sprintf(`{"phone": %q, "client_ip": %q, "limit_keys": {"user_id": %q}}`,
			phone, ip, user), auth)
	}
	// Each process loads its scripts and learns the topology first, so a
	// busy machine's first request does not time out mid-race.
	for i, p := range procs {
		testenv.WaitUntil(t, 30*time.Second, fmt.Sprintf("process %d to answer a send", i), func() error {
			r := sendFor(p, fmt.Sprintf("warm-%d", i), fmt.Sprintf("+1415555%04d", 9000+i), "198.51.100.1")
			if r.Status != 202 && r.Status != 429 {
				return fmt.Errorf("%d %s", r.Status, r.Raw)
			}
			return nil
		})
	}
	statuses := testenv.Race(t, 40, func(i int) string {
		r := sendFor(procs[i%len(procs)], "user-1", fmt.Sprintf("+1650253%04d", i), fmt.Sprintf("198.19.%d.%d", net, i))
		if r.Status == 429 && (r.ErrorField("scope") != "key" || r.ErrorField("key") != "user_id") {
			return "429 " + string(r.Raw)
		}
		return strconv.Itoa(r.Status)
	})
	if statuses["202"] != 5 || statuses["429"] != 35 {
		t.Fatalf("statuses %v, want 5 202 and 35 429 naming user_id", statuses)
	}
	// Refused texts give the key back: more of them than its max, all 502.
	for i := range 7 {
		if r := sendFor(procs[i%len(procs)], "user-2", fmt.Sprintf("+1201555%04d", i), fmt.Sprintf("198.19.%d.%d", net, 100+i)); r.Status != 502 {
			t.Fatalf("refused text %d: %d %s", i, r.Status, r.Raw)
		}
	}
	r := adminCall(t, procs[0], http.MethodGet, "/v1/admin/limits?key=user_id&value=user-2")
	if r.Status != 200 || r.Body["windows"].([]any)[0].(map[string]any)["used"] != 0.0 {
		t.Fatalf("user-2 after refunds: %d %s", r.Status, r.Raw)
	}
}
