package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"smsgw/internal/redistopo"
	"smsgw/internal/testenv"
)

// TestThreeRegionsOneFile: three regions started from one and the same
// file, SMSGW_REGION naming each process's region and every region's Redis
// listed under [region.redis.*], its own included (docs/regions.md's way).
// Races from all three on numbers homed in each admit exactly the limit, a
// code sent through one region verifies through another, a verification
// is canceled through the region that answered, and a region's
// Redis gone fails its numbers closed everywhere while the others serve.
// TestThreeRegions checks the latencies and cuts; it needs a proxy per
// link, which one shared file cannot name.
func TestThreeRegionsOneFile(t *testing.T) {
	redisA, redisB := redistopo.StartSingle(t), redistopo.StartSingle(t)
	cluster := redistopo.StartCluster(t, 3)
	prefix := "e2e:" + testenv.Unique() + ":"
	file := fmt.Sprintf(`[redis]
key_prefix = %q
timeout = "5s"

[sender]
provider = "fake"

[pumping]
mode = "enforce"
%s
[region]
default_home = "b"
fallback = 0

[region.homes]
GB = "a"
FR = "c"

[region.redis.a]
url = "redis://%s/0"
timeout = "5s"

[region.redis.b]
url = "redis://%s/0"
timeout = "5s"

[region.redis.c]
cluster_addrs = %s
timeout = "5s"
`, prefix, regionsConfig, redisA.Addr, redisB.Addr, tomlList(cluster.Addrs()))
	path := filepath.Join(t.TempDir(), "smsgw.toml")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	procs := map[string]*process{}
	for _, name := range []string{"a", "b", "c"} {
		// No SMSGW_REDIS_URL: the region's own entry is its Redis.
		e := env{databaseURL: testenv.MigratedDatabase(t)}
		procs[name] = startFile(t, e, path, []string{"SMSGW_REGION=" + name}, "")
	}
	all := []*process{procs["a"], procs["b"], procs["c"]}
	for i, p := range all {
		for _, phone := range []string{fmt.Sprintf("+4474001%05d", 80000+i), fmt.Sprintf("+1415555%04d", 8000+i), fmt.Sprintf("+336129%05d", 80000+i)} {
			testenv.WaitFor(t, 60*time.Second, "a first send from "+p.URL, func() bool { return sendFrom(t, p, phone).Status == 202 })
		}
	}

	t.Run("races from three regions admit exactly the limit", func(t *testing.T) {
		for _, phone := range []string{"+447400123456", "+14155552671", "+33612345601"} { // homed in a; in b; in c (the Cluster)
			got := raceFromAll(t, all, phone, 30)
			if total(got, 202) != 3 || total(got, 429) != 27 {
				t.Fatalf("%s: statuses per region %v, want 3 202 and 27 429 in all", phone, got)
			}
			if n := textsTo(t, all, phone); n != 3 {
				t.Fatalf("%s: %d texts over the regions, want 3", phone, n)
			}
		}
	})

	t.Run("a code sent through one region verifies through another", func(t *testing.T) {
		for _, tc := range []struct {
			phone      string
			from, with string
		}{
			{"+33612345602", "a", "b"},
			{"+447400123402", "c", "b"},
			{"+14155552602", "a", "c"},
		} {
			from, with := procs[tc.from], procs[tc.with]
			if res := sendFrom(t, from, tc.phone); res.Status != 202 {
				t.Fatalf("%s from %s: %d %s", tc.phone, tc.from, res.Status, res.Raw)
			}
			bodies := outbox(t, from, tc.phone)
			if len(bodies) != 1 {
				t.Fatalf("%s: %d texts from %s, want 1", tc.phone, len(bodies), tc.from)
			}
			res := post(t, with.URL+"/v1/otp/verify", fmt.Sprintf(`{"phone": %q, "code": %q}`, tc.phone, codeIn(bodies[0])), nil)
			if res.Status != 200 {
				t.Fatalf("%s: verify through %s: %d %s, want 200", tc.phone, tc.with, res.Status, res.Raw)
			}
		}
	})

	t.Run("a verification is canceled through the region that answered its send", func(t *testing.T) {
		// Homed in a, sent and canceled through b: the record is b's (its
		// Postgres), the code a's (its Redis), withdrawn across regions.
		const phone = "+447400123403"
		b := procs["b"]
		res := sendFrom(t, b, phone)
		if res.Status != 202 {
			t.Fatalf("send through b: %d %s", res.Status, res.Raw)
		}
		id, _ := res.Body["verification_id"].(string)
		bodies := outbox(t, b, phone)
		if len(bodies) != 1 {
			t.Fatalf("%d texts, want 1", len(bodies))
		}
		if c := post(t, b.URL+"/v1/otp/verifications/"+id+"/cancel", "", bearer(adminToken)); c.Status != 200 || c.Body["status"] != "canceled" {
			t.Fatalf("cancel through b: %d %s, want 200 canceled", c.Status, c.Raw)
		}
		v := post(t, procs["a"].URL+"/v1/otp/verify", fmt.Sprintf(`{"phone": %q, "code": %q}`, phone, codeIn(bodies[0])), nil)
		if v.Status != 404 || v.ErrorCode() != "no_pending_code" {
			t.Fatalf("verify at the home after the cancel: %d %s, want 404 no_pending_code", v.Status, v.Raw)
		}
	})

	t.Run("a region's Redis dies: its numbers fail closed, the others serve", func(t *testing.T) {
		redisB.Kill()
		for name, p := range procs {
			if res := sendFrom(t, p, "+14155557102"); res.Status != 503 {
				t.Fatalf("%s, for a number homed in b, whose Redis is gone: %d %s, want 503", name, res.Status, res.Raw)
			}
		}
		for i, name := range []string{"a", "c"} {
			if res := sendFrom(t, procs[name], fmt.Sprintf("+4474003%05d", 10+i)); res.Status != 202 {
				t.Fatalf("%s, for a number homed in a: %d %s", name, res.Status, res.Raw)
			}
			if res := sendFrom(t, procs[name], fmt.Sprintf("+336127%05d", 10+i)); res.Status != 202 {
				t.Fatalf("%s, for a number homed in c: %d %s", name, res.Status, res.Raw)
			}
		}
	})
}
