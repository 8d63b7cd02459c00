package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/internal/redistopo"
	"smsgw/internal/testenv"
)

// topologyConfig: client IPs from X-Forwarded-For, a refusing number range,
// and no pumping rules (these suites send many unverified texts).
const topologyConfig = `
[server]
trusted_proxies = ["127.0.0.0/8"]

[pumping]
mode = "off"

[sender.fake]
fail_prefixes = ["+1201"]
`

func tomlList(addrs []string) string {
	return `["` + strings.Join(addrs, `", "`) + `"]`
}

// raceSends posts n sends at once, alternating between the processes, and
// counts the statuses.
func raceSends(t *testing.T, procs []*process, n int, body func(i int) (phone, ip string, header map[string]string)) map[int]int {
	t.Helper()
	phones, headers := make([]string, n), make([]map[string]string, n)
	for i := range n {
		phone, ip, header := body(i)
		h := map[string]string{"X-Forwarded-For": ip}
		for k, v := range header {
			h[k] = v
		}
		phones[i], headers[i] = phone, h
	}
	statuses := testenv.Race(t, n, func(i int) string {
		r := post(t, procs[i%len(procs)].URL+"/v1/otp/send", fmt.Sprintf(`{"phone": %q}`, phones[i]), headers[i])
		return strconv.Itoa(r.Status)
	})
	got := map[int]int{}
	for status, count := range statuses {
		code, _ := strconv.Atoi(status)
		got[code] = count
	}
	return got
}

// warmUp has each process load its scripts and learn the topology (a cold
// cluster client maps the slots and meets NOSCRIPT on every shard), so a
// busy machine's first request does not time out in the middle of a race.
func warmUp(t *testing.T, procs []*process) {
	t.Helper()
	for i, p := range procs {
		testenv.WaitUntil(t, 30*time.Second, fmt.Sprintf("process %d to answer a send", i), func() error {
			r := post(t, p.URL+"/v1/otp/send", fmt.Sprintf(`{"phone": "+1415555%04d"}`, 9000+i), map[string]string{"X-Forwarded-For": "198.51.100.1"})
			if r.Status != 202 && r.Status != 429 {
				return fmt.Errorf("%d %s", r.Status, r.Raw)
			}
			return nil
		})
	}
}

// TestOnRedisCluster runs two service processes on a 3-master Redis Cluster
// of the test's own: limits stay exact with the phone's and the IP's windows
// on different shards, and codes, refunds, idempotency and the refusal
// cache's invalidation work there.
func TestOnRedisCluster(t *testing.T) {
	c := redistopo.StartCluster(t, 3)
	e := env{
		redisURL:  "redis://127.0.0.1:1/0", // not used on Cluster
		keyPrefix: "e2e:" + testenv.Unique() + ":",
		// Generous for a loaded -race machine: these races check exactness.
		redisTOML:   "timeout = \"2s\"\ncluster_addrs = " + tomlList(c.Addrs()),
		databaseURL: testenv.Database(t),
	}
	a, b := start(t, e, topologyConfig), start(t, e, topologyConfig)
	procs := []*process{a, b}
	warmUp(t, procs)

	t.Run("100 racing sends for one phone admit one", func(t *testing.T) {
		got := raceSends(t, procs, 100, func(i int) (string, string, map[string]string) {
			return "+14155552671", fmt.Sprintf("198.18.0.%d", i), nil
		})
		if got[202] != 1 || got[429] != 99 {
			t.Fatalf("statuses %v, want 1 202 and 99 429", got)
		}
	})
	t.Run("one IP with fresh phones admits its window", func(t *testing.T) {
		got := raceSends(t, procs, 100, func(i int) (string, string, map[string]string) {
			return fmt.Sprintf("+1650253%04d", i), "198.18.1.1", nil
		})
		if got[202] != 5 || got[429] != 95 {
			t.Fatalf("statuses %v, want 5 202 and 95 429", got)
		}
	})
	t.Run("send on one process, verify on the other", func(t *testing.T) {
		phone := "+14155550142"
		xff := map[string]string{"X-Forwarded-For": "198.18.2.1"}
		if r := post(t, a.URL+"/v1/otp/send", fmt.Sprintf(`{"phone": %q}`, phone), xff); r.Status != 202 {
			t.Fatalf("send: %d %s", r.Status, r.Raw)
		}
		bodies := outboxBodies(t, a, phone)
		code := codeIn(bodies[len(bodies)-1])
		wrong := "000000"
		if code == wrong {
			wrong = "111111"
		}
		if r := post(t, b.URL+"/v1/otp/verify", fmt.Sprintf(`{"phone": %q, "code": %q}`, phone, wrong), xff); r.Status != 422 {
			t.Fatalf("wrong code: %d %s", r.Status, r.Raw)
		}
		if r := post(t, b.URL+"/v1/otp/verify", fmt.Sprintf(`{"phone": %q, "code": %q}`, phone, code), xff); r.Status != 200 {
			t.Fatalf("right code: %d %s", r.Status, r.Raw)
		}
		if r := post(t, a.URL+"/v1/otp/verify", fmt.Sprintf(`{"phone": %q, "code": %q}`, phone, code), xff); r.Status != 404 {
			t.Fatalf("used code: %d %s", r.Status, r.Raw)
		}
	})
	t.Run("a refused text gives its quota back", func(t *testing.T) {
		for i, p := range []*process{a, b, a} {
			r := post(t, p.URL+"/v1/otp/send", `{"phone": "+12015550123"}`, map[string]string{"X-Forwarded-For": fmt.Sprintf("198.18.3.%d", i)})
			if r.Status != 502 {
				t.Fatalf("send %d: %d %s; want 502 every time (the quota is given back)", i, r.Status, r.Raw)
			}
		}
	})
	t.Run("one Idempotency-Key through two processes texts once", func(t *testing.T) {
		phone := "+14155550177"
		got := raceSends(t, procs, 20, func(i int) (string, string, map[string]string) {
			return phone, "198.18.4.1", map[string]string{"Idempotency-Key": "signup-" + e.keyPrefix}
		})
		if got[202] != 20 {
			t.Fatalf("statuses %v, want 20 202", got)
		}
		if n := len(outboxBodies(t, a, phone)) + len(outboxBodies(t, b, phone)); n != 1 {
			t.Fatalf("%d texts, want 1", n)
		}
	})
	t.Run("a reset on one process reaches the other's refusal cache", func(t *testing.T) {
		phone := "+14155550188"
		send := func(p *process, ip string) int {
			return post(t, p.URL+"/v1/otp/send", fmt.Sprintf(`{"phone": %q}`, phone), map[string]string{"X-Forwarded-For": ip}).Status
		}
		if s := send(a, "198.18.5.1"); s != 202 {
			t.Fatalf("first: %d", s)
		}
		for i := range 3 { // refused, then refused from b's memory
			if s := send(b, fmt.Sprintf("198.18.5.%d", 10+i)); s != 429 {
				t.Fatalf("repeat %d: %d", i, s)
			}
		}
		if r := adminCall(t, a, http.MethodDelete, "/v1/admin/limits?phone=%2B14155550188"); r.Status != 200 {
			t.Fatalf("reset: %d %s", r.Status, r.Raw)
		}
		i := 0
		testenv.WaitFor(t, 5*time.Second, "b to admit the phone after a reset on a", func() bool {
			i++
			return send(b, fmt.Sprintf("198.18.6.%d", i-1)) == 202
		})
	})
}

// TestSentinelFailover kills the primary (kill -9) while two processes race
// on hot phones, after cutting its replica off so that the last admissions
// exist only on the primary. Sentinel promotes the replica. With
// min_replicas_acked = 1 no phone is ever admitted twice; with 0 the
// admissions the replica never got are forgotten and admitted again.
func TestSentinelFailover(t *testing.T) {
	for _, acked := range []int{1, 0} {
		t.Run(fmt.Sprintf("min_replicas_acked=%d", acked), func(t *testing.T) {
			over, switchTime := failoverRace(t, acked)
			t.Logf("min_replicas_acked=%d: %d over-admissions; first 503 to first 202 on the new primary: %v", acked, over, switchTime)
			if acked > 0 && over != 0 {
				t.Fatalf("%d phones admitted over their limit through a failover", over)
			}
			if acked == 0 && over == 0 {
				t.Fatal("nothing was lost with min_replicas_acked = 0: the test did not cut replication before the kill")
			}
		})
	}
}

func failoverRace(t *testing.T, acked int) (over int, switchTime time.Duration) {
	s := redistopo.StartSentinel(t, 3, time.Second)
	e := env{
		redisURL:  "redis://127.0.0.1:1/0", // the primary is found through Sentinel
		keyPrefix: "e2e:" + testenv.Unique() + ":",
		redisTOML: fmt.Sprintf("sentinel_master = %q\nsentinel_addrs = %s\nmin_replicas_acked = %d\ntimeout = \"500ms\"",
			s.Master, tomlList(s.SentinelAddrs()), acked),
		databaseURL: testenv.Database(t),
	}
	procs := []*process{start(t, e, topologyConfig), start(t, e, topologyConfig)}
	warmUp(t, procs)

	var (
		mu       sync.Mutex
		admitted = map[string]int{}
		// admissions says when and through which process each phone was
		// admitted, for the log of a failure.
		admissions = map[string][]string{}
		first503   time.Time
		after202   time.Time
		seq        atomic.Int64
		killed     atomic.Bool
	)
	send := func(phone string) int {
		i := seq.Add(1)
		began := time.Now()
		r := post(t, procs[i%2].URL+"/v1/otp/send", fmt.Sprintf(`{"phone": %q}`, phone),
			map[string]string{"X-Forwarded-For": fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)})
		mu.Lock()
		defer mu.Unlock()
		switch r.Status {
		case 202:
			admitted[phone]++
			admissions[phone] = append(admissions[phone], fmt.Sprintf("%s via %s (killed %v)", began.Format("15:04:05.000"), procs[i%2].URL, killed.Load()))
			// Only a request made after the outage began was admitted by
			// the new primary.
			if !first503.IsZero() && began.After(first503) && after202.IsZero() {
				after202 = time.Now()
			}
		case 503:
			if killed.Load() && first503.IsZero() {
				first503 = time.Now()
			}
		case 429:
		default:
			t.Errorf("send %s: %d %s", phone, r.Status, r.Raw)
		}
		return r.Status
	}
	// The first 20 phones are hot from the start; the last 10 are sent once
	// while the replica is cut off, and join the hot ones after the kill.
	phones := make([]string, 30)
	for i := range phones {
		phones[i] = fmt.Sprintf("+1415555%04d", 1000+i)
	}
	hot, lost := phones[:20], phones[20:]
	var nhot atomic.Int64
	nhot.Store(int64(len(hot)))
	// Racers hammer the hot phones (each may be admitted once in the test)
	// from start to end; fresh phones show when the service admits again.
	stopRacers := testenv.Loop(t, 8, func(w, i int) {
		i += w
		send(phones[int64(i)%nhot.Load()])
		if i%4 == 0 {
			n := seq.Load()
			send(fmt.Sprintf("+1650%d%04d", 253+(n/10000)%5, n%10000))
		}
	})
	defer stopRacers()

	// The replica is cut off; the primary goes on admitting (or, waiting for
	// a replica, refunds and answers 503). Then the primary dies.
	s.Link.Cut()
	for _, p := range lost {
		send(p)
	}
	killed.Store(true)
	s.Primary.Kill()
	// Racers now also ask for the phones admitted only on the dead primary.
	nhot.Store(int64(len(phones)))
	// Once Sentinel has promoted the replica, the old primary comes back
	// (empty, as after a crash without persistence) and Sentinel makes it the
	// new primary's replica: with min_replicas_acked = 1 nothing is admitted
	// before that.
	// The empty old primary comes back only once every sentinel names the
	// replica: one that still names the old primary could hand it back the
	// primary's role, and the replica would then copy its empty data set.
	var scs []*redis.SentinelClient
	for _, n := range s.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: n.Addr})
		defer sc.Close()
		scs = append(scs, sc)
	}
	promoted := func() bool {
		for _, sc := range scs {
			addr, err := sc.GetMasterAddrByName(context.Background(), s.Master).Result()
			if err != nil || addr[1] != strconv.Itoa(s.Replica.Port) {
				return false
			}
		}
		return true
	}
	restarted := false
	testenv.WaitFor(t, 60*time.Second, "a send admitted after killing the primary", func() bool {
		if !restarted && promoted() {
			s.Primary.Restart()
			restarted = true
		}
		mu.Lock()
		done := !after202.IsZero() && time.Since(after202) > 2*time.Second
		mu.Unlock()
		if !done {
			for _, p := range lost {
				send(p)
			}
		}
		return done
	})
	mu.Lock()
	defer mu.Unlock()
	for phone, n := range admitted {
		over += max(n-1, 0)
		if n > 1 && acked > 0 {
			t.Logf("%s admitted %d times: %v", phone, n, admissions[phone])
		}
	}
	return over, after202.Sub(first503)
}

// TestFrozenRedisAnswersWithinTheTimeout freezes the service's Redis
// (SIGSTOP) under a load of racing sends: every 503 must be decided within
// redis.timeout and a small margin, however many calls were in flight ahead
// of it (they used to queue behind stuck pipelines: up to three timeouts).
// The bound is on the service's own request time (its debug log, audit row
// included); what the client waits on top (a machine busy with the whole
// suite) is logged. After the thaw, sends work again by themselves.
func TestFrozenRedisAnswersWithinTheTimeout(t *testing.T) {
	node := redistopo.StartSingle(t)
	e := newEnv(t)
	e.redisURL = "redis://" + node.Addr + "/0"
	const timeout = time.Second
	e.redisTOML = fmt.Sprintf("timeout = %q", timeout)
	p := start(t, e, topologyConfig+"\n[log]\nlevel = \"debug\"\n")
	warmUp(t, []*process{p})

	var (
		mu      sync.Mutex
		worst   time.Duration
		refused int
		seq     atomic.Int64
	)
	stop := testenv.Loop(t, 32, func(int, int) {
		n := seq.Add(1)
		began := time.Now()
		r := post(t, p.URL+"/v1/otp/send", fmt.Sprintf(`{"phone": "+1650%d%04d"}`, 253+(n/10000)%5, n%10000),
			map[string]string{"X-Forwarded-For": fmt.Sprintf("10.%d.%d.%d", n>>16&255, n>>8&255, n&255)})
		if r.Status == 503 {
			mu.Lock()
			worst = max(worst, time.Since(began))
			refused++
			mu.Unlock()
		}
	})
	testenv.WaitFor(t, 10*time.Second, "some load", func() bool { return seq.Load() > 100 })
	node.Pause()
	testenv.WaitFor(t, 20*time.Second, "100 answers while frozen", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return refused >= 100
	})
	node.Resume()
	stop()
	var decided time.Duration
	var logged int
	for _, line := range strings.Split(p.stderr.String(), "\n") {
		var entry struct {
			Msg      string        `json:"msg"`
			Status   int           `json:"status"`
			Route    string        `json:"route"`
			Duration time.Duration `json:"duration"`
		}
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "request" && entry.Status == 503 && strings.HasSuffix(entry.Route, "/send") {
			decided = max(decided, entry.Duration)
			logged++
		}
	}
	t.Logf("%d sends answered 503 while Redis was frozen (redis.timeout %v): the slowest decided in %v, its client waited %v", refused, timeout, decided, worst)
	if logged < refused {
		t.Fatalf("the service logged %d of the %d 503s", logged, refused)
	}
	// Up to three timeouts before; the margin is for a loaded -race run.
	if decided > 2*timeout {
		t.Fatalf("a 503 took the service %v with redis.timeout %v", decided, timeout)
	}
	testenv.WaitFor(t, 10*time.Second, "sends to work again", func() bool {
		return post(t, p.URL+"/v1/otp/send", `{"phone": "+14155550199"}`, map[string]string{"X-Forwarded-For": "192.0.2.78"}).Status == 202
	})
}
