package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"smsgw/internal/testenv"
)

const faultConfig = `
[server]
trusted_proxies = ["127.0.0.0/8"]

[pumping]
mode = "off" # many unverified texts: the windows and the audit are tested here

[audit]
write_timeout = "100ms"
`

// loadSeq numbers the requests of every load of the run: each has its own
// phone, request id and client IP, also across restarts within a test.
var loadSeq atomic.Int64

// load sends from workers until end is called, each request with its own
// X-Request-ID, phone and client IP, and remembers the answered ones.
type load struct {
	mu       sync.Mutex
	answered map[string]int       // request id → status
	at       map[string]time.Time // request id → when its answer was read
	failed   atomic.Int64         // no answer (connection dropped or refused)
	stop     func()
}

func startLoad(t *testing.T, url func() string, workers int) *load {
	t.Helper()
	return startLoadOf(t, url, workers, func(n int64) (string, string) {
		return fmt.Sprintf("+1650%07d", 2530000+n), fmt.Sprintf("10.%d.%d.%d", n>>16&255, n>>8&255, n&255)
	})
}

// startLoadOf is startLoad with the phone and client address of the n-th
// request from who.
func startLoadOf(t *testing.T, url func() string, workers int, who func(n int64) (phone, ip string)) *load {
	t.Helper()
	l := &load{answered: map[string]int{}, at: map[string]time.Time{}}
	c := &http.Client{Timeout: 5 * time.Second}
	l.stop = testenv.Loop(t, workers, func(int, int) {
		n := loadSeq.Add(1)
		id := fmt.Sprintf("load-%d", n)
		phone, ip := who(n)
		req, _ := http.NewRequest(http.MethodPost, url()+"/v1/otp/send",
			strings.NewReader(fmt.Sprintf(`{"phone": %q}`, phone)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Request-ID", id)
		req.Header.Set("X-Forwarded-For", ip)
		res, err := c.Do(req)
		if err != nil {
			l.failed.Add(1)
			time.Sleep(10 * time.Millisecond)
			return
		}
		res.Body.Close()
		l.mu.Lock()
		l.answered[id] = res.StatusCode
		l.at[id] = time.Now()
		l.mu.Unlock()
	})
	return l
}

func (l *load) end() map[string]int {
	l.stop()
	return l.answered
}

func (l *load) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.answered)
}

// texted reports whether an answer's request may have texted: a send
// accepted, or refused by its provider. Its row is its own and durable
// before the answer; every other answer is counted on its own row or a
// rollup (SPEC "Audit").
func texted(status int) bool { return status == http.StatusAccepted || status == http.StatusBadGateway }

// mayBeLost counts the answers that texted nobody read in the second before
// killedAt (a kill -9 may lose the last second of their records; half a
// second more covers the write itself on a loaded machine).
func (l *load) mayBeLost(killedAt time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for id, st := range l.answered {
		if !texted(st) && l.at[id].After(killedAt.Add(-1500*time.Millisecond)) {
			n++
		}
	}
	return n
}

// requireOneRowEach checks the audit trail against the answered requests:
// each that may have texted has exactly one row of its own (by request id),
// and the answers that texted nobody are counted exactly once in sum(count)
// of their rows, plain or rollups. A request whose answer the client never
// read (unread), or that accepts sent, may be counted too, and mayLose of
// them may be missing (the last second before a kill -9).
func requireOneRowEach(t *testing.T, e env, answered map[string]int, unread int64, mayLose int) {
	t.Helper()
	ctx := context.Background()
	conn := e.db(t)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT request_id, count(*) FROM audit_log
		WHERE kind = 'send' AND outcome IN ('sending', 'sent', 'provider_error') GROUP BY request_id`)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		rows.Scan(&id, &n)
		stored[id] = n
	}
	var counted int
	if err := conn.QueryRow(ctx, `SELECT coalesce(sum(count), 0) FROM audit_log
		WHERE kind = 'send' AND outcome NOT IN ('sending', 'sent', 'provider_error')`).Scan(&counted); err != nil {
		t.Fatal(err)
	}
	missing, doubled, refused := 0, 0, 0
	for id, st := range answered {
		if !texted(st) {
			refused++
			continue
		}
		switch stored[id] {
		case 0:
			missing++
		case 1:
		default:
			doubled++
		}
	}
	if missing > 0 || doubled > 0 {
		t.Fatalf("of %d answered requests that may have texted, %d have no audit row and %d more than one", len(answered)-refused, missing, doubled)
	}
	unread += int64(refusedProbes.of(t))
	if counted < refused-mayLose || counted > refused+int(unread) {
		t.Fatalf("%d answers that texted nobody, counted %d times in the audit trail (%d may be lost to a kill -9, %d answers unread)", refused, counted, mayLose, unread)
	}
	t.Logf("%d answered requests that may have texted, each with exactly one audit row; %d that texted nobody, counted %d times (%d rows in all)",
		len(answered)-refused, refused, counted, len(stored))
}

// viaProxy points a test environment's database through a proxy the test
// can cut, as if Postgres went down.
func viaProxy(t *testing.T, e env) (env, *testenv.Proxy) {
	t.Helper()
	u, _ := url.Parse(e.databaseURL)
	proxy := testenv.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	through := e
	through.databaseURL = u.String()
	return through, proxy
}

// TestPostgresOutageUnderLoad: Postgres goes away in the middle of a load of
// sends and comes back. Texts keep flowing, /readyz says Postgres is down,
// rows wait in the spool, and afterwards every answered request has exactly
// one audit row.
func TestPostgresOutageUnderLoad(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	through, proxy := viaProxy(t, e)
	p := start(t, through, faultConfig)
	l := startLoad(t, func() string { return p.URL }, 8)
	testenv.WaitFor(t, 60*time.Second, "some load", func() bool { return l.count() > 50 })

	proxy.Cut()
	before := l.count()
	testenv.WaitFor(t, 60*time.Second, "sends while Postgres is down", func() bool { return l.count() > before+200 })
	r := get(t, p.URL+"/readyz")
	if r.Status != 503 || !strings.Contains(string(r.Raw), "postgres") {
		t.Fatalf("readyz with Postgres down: %d %s", r.Status, r.Raw)
	}
	m := get(t, p.URL+"/metrics")
	if !strings.Contains(string(m.Raw), "smsgw_audit_spooling 1") {
		t.Fatalf("metrics do not show spooling:\n%s", grepLines(string(m.Raw), "smsgw_audit"))
	}

	proxy.Heal()
	testenv.WaitFor(t, 60*time.Second, "the spool to drain", func() bool {
		return strings.Contains(string(get(t, p.URL+"/metrics").Raw), "smsgw_audit_spooling 0")
	})
	answered := l.end()
	p.stop(t)
	accepted := 0
	for _, st := range answered {
		if st == 202 {
			accepted++
		}
	}
	if accepted < 200 {
		t.Fatalf("only %d texts sent: sends must keep flowing while Postgres is down", accepted)
	}
	requireOneRowEach(t, e, answered, l.failed.Load(), 0)
}

// TestKilledWithPostgresDown: the service is SIGKILLed in the middle of a
// load while Postgres is down, so acknowledged rows sit only in the spool.
// Restarted (with Postgres back), it replays them: every request that got an
// answer has exactly one audit row.
func TestKilledWithPostgresDown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	through, proxy := viaProxy(t, e)
	dir := t.TempDir()
	p := startIn(t, through, faultConfig, dir)
	proxy.Cut()
	l := startLoad(t, func() string { return p.URL }, 8)
	testenv.WaitFor(t, 60*time.Second, "load with Postgres down", func() bool { return l.count() > 300 })
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	answered := l.end()

	proxy.Heal()
	again := startIn(t, through, faultConfig, dir) // the same working directory: the same spool
	testenv.WaitFor(t, 60*time.Second, "the replay", func() bool {
		return strings.Contains(string(get(t, again.URL+"/metrics").Raw), "smsgw_audit_spooling 0")
	})
	again.stop(t)
	requireOneRowEach(t, e, answered, l.failed.Load(), 0)
}

// TestFullSpoolFailsClosed: with Postgres down, once the spool reaches its
// cap, sends answer 503; every text has its row and no answered request
// lacks one.
func TestFullSpoolFailsClosed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	through, proxy := viaProxy(t, e)
	p := start(t, through, faultConfig+"spool_max_bytes = 65536\n")
	proxy.Cut()
	l := startLoad(t, func() string { return p.URL }, 4)
	testenv.WaitFor(t, 60*time.Second, "the spool to fill up", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, st := range l.answered {
			if st == 503 {
				return true
			}
		}
		return false
	})
	answered := l.end()
	proxy.Heal()
	testenv.WaitFor(t, 60*time.Second, "the replay", func() bool {
		return strings.Contains(string(get(t, p.URL+"/metrics").Raw), "smsgw_audit_spooling 0")
	})
	texted := outboxPhones(t, p)
	p.stop(t)
	requireOneRowEach(t, e, answered, l.failed.Load(), 0)
	// Nobody was texted unaudited: sends in flight when the spool filled
	// up texted only with their row in its headroom.
	requireEveryTextAudited(t, e, texted)
}

// outboxPhones counts the fake provider's texts per phone.
func outboxPhones(t *testing.T, p *process) map[string]int {
	t.Helper()
	r := adminCall(t, p, http.MethodGet, "/v1/fake/messages")
	var msgs []struct{ To string }
	if err := json.Unmarshal(r.Raw, &msgs); err != nil {
		t.Fatalf("outbox: %s", r.Raw)
	}
	out := map[string]int{}
	for _, m := range msgs {
		out[m.To]++
	}
	return out
}

// TestRedisOutage runs smsgw on a Redis of the test's own and stops it in
// the middle of a load: sends answer 503 within a second and text nobody;
// when Redis is back, sends work again by themselves.
func TestRedisOutage(t *testing.T) {
	t.Parallel()
	port := testenv.FreePort(t)
	redis := startRedis(t, port)
	e := newEnv(t)
	e.redisURL = fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	p := start(t, e, faultConfig)
	l := startLoad(t, func() string { return p.URL }, 4)
	testenv.WaitFor(t, 60*time.Second, "some load", func() bool { return l.count() > 50 })

	redis.Process.Kill()
	redis.Wait()
	// Requests in flight when Redis died may still text; one made after
	// must not. Its phone is one the load never uses.
	r := post(t, p.URL+"/v1/otp/send", `{"phone": "+14155552671"}`, map[string]string{"X-Request-ID": "outage-probe"})
	if r.Status != 503 || r.ErrorCode() != "unavailable" {
		t.Fatalf("send with Redis down: %d %s", r.Status, r.Raw)
	}
	// A dead Redis refuses connections: the 503 comes from the refusal, not
	// from waiting out the call's timeout (a hang). The cause is asserted,
	// not a duration, which a loaded machine running -race stretches.
	testenv.WaitFor(t, 30*time.Second, "the probe's failure logged", func() bool {
		return strings.Contains(p.stderr.String(), `"request_id":"outage-probe"`)
	})
	for _, line := range strings.Split(p.stderr.String(), "\n") {
		if strings.Contains(line, `"request_id":"outage-probe"`) && strings.Contains(line, "no answer in time") {
			t.Fatalf("the 503 waited out the Redis timeout instead of failing on the refused connection: %s", line)
		}
	}
	if r := post(t, p.URL+"/v1/otp/verify", `{"phone": "+14155552671", "code": "123456"}`, nil); r.Status != 503 {
		t.Fatalf("verify with Redis down: %d", r.Status)
	}
	if texts := outboxBodies(t, p, "+14155552671"); len(texts) != 0 {
		t.Fatalf("texted with Redis down: %v", texts)
	}
	if r := get(t, p.URL+"/readyz"); r.Status != 503 || !strings.Contains(string(r.Raw), "redis") {
		t.Fatalf("readyz: %d %s", r.Status, r.Raw)
	}

	startRedis(t, port)
	probes := int64(1) // the send with Redis down, and the refused ones below
	testenv.WaitFor(t, 60*time.Second, "sends to work again", func() bool {
		ok := post(t, p.URL+"/v1/otp/send", fmt.Sprintf(`{"phone": "+1415555%04d"}`, time.Now().UnixNano()%10000),
			map[string]string{"X-Forwarded-For": "192.0.2.77"}).Status == 202
		if !ok {
			probes++
		}
		return ok
	})
	answered := l.end()
	p.stop(t)
	requireOneRowEach(t, e, answered, l.failed.Load()+probes, 0)
}

// startRedis runs a redis-server of the test's own.
func startRedis(t *testing.T, port int) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		testenv.Unavailable(t, "redis-server", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	testenv.WaitFor(t, 60*time.Second, "redis-server", func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return cmd
}
