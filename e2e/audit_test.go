package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"smsgw/internal/testenv"
)

// gatewaySecret is SMSGW_HTTP_SECRET of processes texting through a
// recordingGateway.
const gatewaySecret = "e2e-gateway-secret-0123456789abcdefghijkl"

// recordingGateway is an in-house SMS gateway (the "http" provider) that
// keeps every text it receives, as it receives it: it knows every text
// smsgw ever handed to a provider, whatever happens to smsgw afterwards.
type recordingGateway struct {
	*httptest.Server
	mu    sync.Mutex
	texts map[string]int // phone → texts received
	// poison is how many of the next texts get a message id with a NUL
	// byte, which Postgres refuses to store.
	poison atomic.Int64
	seq    atomic.Int64
}

func newRecordingGateway(t *testing.T) *recordingGateway {
	t.Helper()
	g := &recordingGateway{texts: map[string]int{}}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var text struct{ To string }
		if err := json.NewDecoder(r.Body).Decode(&text); err != nil || text.To == "" {
			http.Error(w, "bad text", http.StatusBadRequest)
			return
		}
		g.mu.Lock()
		g.texts[text.To]++
		g.mu.Unlock()
		id := fmt.Sprintf("gw-%d", g.seq.Add(1))
		if g.poison.Add(-1) >= 0 {
			id = "gw-\x00-" + id
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"id": id})
	}))
	t.Cleanup(g.Close)
	return g
}

// config is the TOML that makes smsgw text through the gateway.
func (g *recordingGateway) config() string {
	return fmt.Sprintf("\n[sender]\nprovider = \"http\"\n\n[sender.http]\nurl = %q\n", g.URL)
}

func (g *recordingGateway) phones() map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.texts)
}

var gatewayEnv = []string{"SMSGW_HTTP_SECRET=" + gatewaySecret}

// requireSpoolReplayed ends the load, waits until p's spool has reached
// Postgres, stops p and requires a row for every answer and every text.
func requireSpoolReplayed(t *testing.T, e env, p *process, l *load, g *recordingGateway) {
	t.Helper()
	answered := l.end()
	requireSpoolReplayedBy(t, e, p, g, answered, l.failed.Load(), 0)
}

// requireSpoolReplayedBy waits until p's spool has reached Postgres, stops
// p, and requires a row for every answer and every text.
func requireSpoolReplayedBy(t *testing.T, e env, p *process, g *recordingGateway, answered map[string]int, unread int64, mayLose int) {
	t.Helper()
	testenv.WaitFor(t, 60*time.Second, "the spool to drain", func() bool { return spoolDrained(t, p) })
	p.stop(t)
	requireOneRowEach(t, e, answered, unread, mayLose)
	requireEveryTextAudited(t, e, g.phones())
}

// requireEveryTextAudited checks that every phone a provider texted has a
// send row that says a text went or may have gone out.
func requireEveryTextAudited(t *testing.T, e env, texted map[string]int) {
	t.Helper()
	ctx := context.Background()
	conn := e.db(t)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT phone_e164, outcome FROM audit_log
		WHERE kind = 'send' AND outcome IN ('sending', 'sent', 'provider_error')`)
	if err != nil {
		t.Fatal(err)
	}
	audited := map[string]bool{}
	sending := 0
	for rows.Next() {
		var phone, outcome string
		if err := rows.Scan(&phone, &outcome); err != nil {
			t.Fatal(err)
		}
		audited[phone] = true
		if outcome == "sending" {
			sending++
		}
	}
	var missing []string
	for phone := range texted {
		if !audited[phone] {
			missing = append(missing, phone)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		t.Fatalf("%d of %d phones the provider texted have no audit row: %v", len(missing), len(texted), missing[:min(10, len(missing))])
	}
	t.Logf("%d phones texted, each with its row (%d rows left sending)", len(texted), sending)
}

func (p *process) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.exited
}

func metricsOf(t *testing.T, p *process) string {
	t.Helper()
	return string(get(t, p.URL+"/metrics").Raw)
}

// spoolDrained reports whether a process has nothing spooled or waiting.
func spoolDrained(t *testing.T, p *process) bool {
	t.Helper()
	m := metricsOf(t, p)
	return strings.Contains(m, "smsgw_audit_spooling 0") && strings.Contains(m, "smsgw_audit_spool_bytes 0")
}

// TestKillNineLosesNoText: smsgw is SIGKILLed under 20 concurrent senders,
// three times, and restarted on the same spool. Every text the provider received has a
// row (sending at least), and every answered request has exactly one.
func TestKillNineLosesNoText(t *testing.T) {
	t.Parallel()
	rig := newKillRig(t)
	answered := map[string]int{}
	var unread int64
	mayLose := 0
	for round := 0; round < 3; round++ {
		p := rig.start(t)
		l := startLoad(t, func() string { return p.URL }, 20)
		testenv.WaitFor(t, 60*time.Second, "load", func() bool { return l.count() > 200 })
		killedAt := time.Now()
		p.kill(t)
		maps.Copy(answered, l.end())
		unread += l.failed.Load()
		mayLose += l.mayBeLost(killedAt)
	}

	rig.requireReplayed(t, answered, unread, mayLose)
}

// TestKillNineUnderAFloodLosesAtMostASecond: smsgw is SIGKILLed while one
// client floods it with refusals (one phone, one address: its own rows,
// then a rollup) beside sends that text. After a restart on the same spool,
// every text has its row, and the refusals are all counted but those
// answered in the last second before the kill (SPEC "Audit").
func TestKillNineUnderAFloodLosesAtMostASecond(t *testing.T) {
	t.Parallel()
	rig := newKillRig(t)
	p := rig.start(t)
	texts := startLoad(t, func() string { return p.URL }, 4)
	refusals := startLoadOf(t, func() string { return p.URL }, 16, func(int64) (string, string) { return "+16502539999", "192.0.2.99" })
	testenv.WaitFor(t, 60*time.Second, "a flood past a rollup's first seconds", func() bool { return refusals.count() > 3000 && texts.count() > 100 })
	killedAt := time.Now()
	p.kill(t)
	answered := texts.end()
	maps.Copy(answered, refusals.end())
	mayLose := texts.mayBeLost(killedAt) + refusals.mayBeLost(killedAt)

	t.Logf("%d refusals answered, %d of them in the last 1.5 s before the kill", refusals.count(), mayLose)
	rig.requireReplayed(t, answered, texts.failed.Load()+refusals.failed.Load(), mayLose)
}

// killRig is smsgw texting through a recording gateway on a spool of the
// test's own, to be killed and started again on the same spool.
type killRig struct {
	e   env
	g   *recordingGateway
	cfg string
	dir string
}

func newKillRig(t *testing.T) *killRig {
	t.Helper()
	e := newEnv(t)
	g := newRecordingGateway(t)
	return &killRig{e: e, g: g, cfg: faultConfig + g.config(), dir: t.TempDir()}
}

// start runs smsgw on the rig's spool.
func (r *killRig) start(t *testing.T) *process {
	t.Helper()
	return startWithIn(t, r.e, r.cfg, gatewayEnv, r.dir)
}

// requireReplayed restarts smsgw on the spool a killed one left, waits
// until the spool has reached Postgres, stops it, and requires a row for
// every answer (requireOneRowEach) and every text.
func (r *killRig) requireReplayed(t *testing.T, answered map[string]int, unread int64, mayLose int) {
	t.Helper()
	requireSpoolReplayedBy(t, r.e, r.start(t), r.g, answered, unread, mayLose)
}

// mountTmpfs mounts a tmpfs of the given size for the test (CI runs as
// root), unmounted when the test ends, even when it fails.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Unavailable(t, "root (to mount a tmpfs)", errors.New("not running as root"))
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		testenv.Unavailable(t, "mount -t tmpfs", fmt.Errorf("%v: %s", err, out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v %s; detaching it", dir, err, out)
			exec.Command("umount", "-l", dir).Run()
		}
	})
	return dir
}

func remount(t *testing.T, dir, mode string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,"+mode, dir).CombinedOutput(); err != nil {
		t.Fatalf("remount %s %s: %v %s", dir, mode, err, out)
	}
}

// readyFails reports whether /readyz is 503 naming what.
func readyFails(t *testing.T, p *process, what string) bool {
	t.Helper()
	r := get(t, p.URL+"/readyz")
	var body struct {
		Error struct{ Failed []string } `json:"error"`
	}
	json.Unmarshal(r.Raw, &body)
	return r.Status == 503 && slices.Contains(body.Error.Failed, what)
}

// saw reports whether the load has had an answer with this status.
func (l *load) saw(status int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, st := range l.answered {
		if st == status {
			return true
		}
	}
	return false
}

// accepts sends one request with a fresh phone and reports whether it was
// accepted.
func accepts(t *testing.T, p *process) bool {
	t.Helper()
	n := time.Now().UnixNano()
	r := post(t, p.URL+"/v1/otp/send", fmt.Sprintf(`{"phone": "+1415555%04d"}`, n%10000),
		map[string]string{"X-Forwarded-For": fmt.Sprintf("192.0.2.%d", n%250+1)})
	if r.Status != 202 {
		refusedProbes.add(t)
	}
	return r.Status == 202
}

// refusedProbes counts, per test, the requests accepts sent that texted
// nobody: the audit trail counts them beside a load's answers.
var refusedProbes = probes{n: map[string]int{}}

type probes struct {
	mu sync.Mutex
	n  map[string]int
}

func (p *probes) add(t *testing.T) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n[t.Name()]++
}

func (p *probes) of(t *testing.T) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n[t.Name()]
}

// TestSpoolOnAFullDisk: Postgres is down and the spool's disk (a 256 KiB
// tmpfs) fills up. Sends answer 503 unavailable rather than text anyone
// unaudited, /readyz names audit, and both recover by themselves when
// Postgres is back. Every text has a row, every answered request has one.
func TestSpoolOnAFullDisk(t *testing.T) {
	t.Parallel()
	mnt := mountTmpfs(t, "256k")
	e := newEnv(t)
	through, proxy := viaProxy(t, e)
	g := newRecordingGateway(t)
	cfg := faultConfig + fmt.Sprintf("spool_dir = %q\n", mnt) + g.config()
	p := startWithIn(t, through, cfg, gatewayEnv, "")
	proxy.Cut()
	l := startLoad(t, func() string { return p.URL }, 8)
	testenv.WaitFor(t, 60*time.Second, "503s once the disk is full", func() bool { return l.saw(503) })
	testenv.WaitFor(t, 30*time.Second, "/readyz to name audit", func() bool { return readyFails(t, p, "audit") })

	proxy.Heal()
	testenv.WaitFor(t, 60*time.Second, "/readyz to recover", func() bool { return get(t, p.URL+"/readyz").Status == 200 })
	testenv.WaitFor(t, 30*time.Second, "sends to be accepted again", func() bool { return accepts(t, p) })
	requireSpoolReplayed(t, e, p, l, g)
}

// TestUnwritableSpool: with Postgres down, the spool's file system turns
// read-only (an unwritable directory for a non-root run). Sends answer 503
// and /readyz names audit; once the spool can be written again they recover
// by themselves, Postgres still down; and once Postgres is back every row
// is there.
func TestUnwritableSpool(t *testing.T) {
	t.Parallel()
	spoolDir := t.TempDir()
	lock, unlock := func() { os.Chmod(filepath.Join(spoolDir, "replica-0"), 0o500) }, func() { os.Chmod(filepath.Join(spoolDir, "replica-0"), 0o700) }
	if os.Geteuid() == 0 { // root writes through any mode bits
		spoolDir = mountTmpfs(t, "16m")
		lock, unlock = func() { remount(t, spoolDir, "ro") }, func() { remount(t, spoolDir, "rw") }
	}
	e := newEnv(t)
	through, proxy := viaProxy(t, e)
	g := newRecordingGateway(t)
	// A write timeout no loaded machine reaches while Postgres is up, so
	// nothing is spooled (and no segment open) until the proxy is cut.
	cfg := fmt.Sprintf("[server]\ntrusted_proxies = [\"127.0.0.0/8\"]\n\n[audit]\nwrite_timeout = \"10s\"\nspool_dir = %q\n", spoolDir) + g.config()
	p := startWithIn(t, through, cfg, gatewayEnv, "")
	testenv.WaitFor(t, 30*time.Second, "a send", func() bool { return accepts(t, p) })
	testenv.WaitFor(t, 30*time.Second, "nothing spooled", func() bool { return spoolDrained(t, p) })
	lock()
	t.Cleanup(unlock)
	proxy.Cut()
	l := startLoad(t, func() string { return p.URL }, 8)
	testenv.WaitFor(t, 60*time.Second, "503s with the spool unwritable", func() bool { return l.saw(503) })
	testenv.WaitFor(t, 30*time.Second, "/readyz to name audit", func() bool { return readyFails(t, p, "audit") })

	unlock()
	testenv.WaitFor(t, 60*time.Second, "sends accepted on the spool again, Postgres still down", func() bool { return accepts(t, p) })
	testenv.WaitFor(t, 30*time.Second, "/readyz to stop naming audit", func() bool { return !readyFails(t, p, "audit") })
	proxy.Heal()
	requireSpoolReplayed(t, e, p, l, g)
}

// TestPoisonedProviderIDHoldsUpNothing: the provider answers a message id
// with a NUL byte while Postgres is down, so the poisoned row sits in the
// spool. When Postgres is back, it is set apart and every row of the normal
// traffic that follows reaches Postgres; /readyz stays ready.
func TestPoisonedProviderIDHoldsUpNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	through, proxy := viaProxy(t, e)
	g := newRecordingGateway(t)
	spoolDir := t.TempDir()
	cfg := faultConfig + fmt.Sprintf("spool_dir = %q\n", spoolDir) + g.config()
	p := startWithIn(t, through, cfg, gatewayEnv, "")
	proxy.Cut()
	g.poison.Store(1)
	xff := map[string]string{"X-Forwarded-For": "192.0.2.1", "X-Request-ID": "poisoned"}
	if r := post(t, p.URL+"/v1/otp/send", `{"phone": "+14155550100"}`, xff); r.Status != 202 {
		t.Fatalf("poisoned send: %d %s", r.Status, r.Raw)
	}
	proxy.Heal()
	answered := map[string]int{"poisoned": 202}
	for i := 0; i < 30; i++ {
		id := fmt.Sprintf("after-%d", i)
		r := post(t, p.URL+"/v1/otp/send", fmt.Sprintf(`{"phone": "+1415555%04d"}`, 200+i),
			map[string]string{"X-Forwarded-For": fmt.Sprintf("192.0.2.%d", 10+i), "X-Request-ID": id})
		if r.Status != 202 {
			t.Fatalf("send %d after the poisoned one: %d %s", i, r.Status, r.Raw)
		}
		answered[id] = r.Status
	}
	testenv.WaitFor(t, 60*time.Second, "the spool to drain", func() bool { return spoolDrained(t, p) })
	if r := get(t, p.URL+"/readyz"); r.Status != 200 {
		t.Fatalf("readyz after a poisoned row: %d %s", r.Status, r.Raw)
	}
	t.Logf("dead letters: %s", grepLines(metricsOf(t, p), "smsgw_audit_rows_dead_lettered_total "))
	p.stop(t)
	requireOneRowEach(t, e, answered, 0, 0)
	requireEveryTextAudited(t, e, g.phones())
	sent := 0
	for _, r := range auditRows(t, e) {
		if strings.HasPrefix(r.RequestID, "after-") && r.Outcome == "sent" {
			sent++
		}
	}
	if sent != 30 {
		t.Fatalf("%d of the 30 sends after the poisoned one reached Postgres as sent", sent)
	}
}

// TestReplicasShareAConfigAndAdoptOrphans: two replicas started from one
// config file in one directory each keep a spool of their own. One is
// SIGKILLed under load while Postgres is down, its rows in its spool; the
// other replays them once Postgres is back.
func TestReplicasShareAConfigAndAdoptOrphans(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	through, proxy := viaProxy(t, e)
	g := newRecordingGateway(t)
	path := writeConfig(t, through, faultConfig+g.config())
	dir := t.TempDir()
	a := startFile(t, through, path, gatewayEnv, dir)
	b := startFile(t, through, path, gatewayEnv, dir)
	proxy.Cut()
	l := startLoad(t, func() string { return a.URL }, 8)
	testenv.WaitFor(t, 60*time.Second, "load on the first replica", func() bool { return l.count() > 200 })
	killedAt := time.Now()
	a.kill(t)
	answered := l.end()
	if segs, _ := filepath.Glob(filepath.Join(dir, "spool", "replica-*", "spool-*.log")); len(segs) == 0 {
		t.Fatal("the killed replica left no spool")
	}
	proxy.Heal()
	testenv.WaitFor(t, 60*time.Second, "the other replica to replay the orphaned spool", func() bool {
		segs, _ := filepath.Glob(filepath.Join(dir, "spool", "replica-*", "spool-*.log"))
		return len(segs) == 0
	})
	if !strings.Contains(b.stderr.String(), "adopting the audit spool") {
		t.Fatalf("the live replica did not say it adopted a spool:\n%s", b.stderr.String())
	}
	b.stop(t)
	requireOneRowEach(t, e, answered, l.failed.Load(), l.mayBeLost(killedAt))
	requireEveryTextAudited(t, e, g.phones())
}

// absentDatabase names a database that does not exist, for a start that
// must fail before it creates anything; the test fails if it was created
// (and drops it).
func absentDatabase(t *testing.T) string {
	t.Helper()
	name := "smsgw_test_absent_" + testenv.Unique()
	t.Cleanup(func() {
		if testenv.DatabaseExists(t, name) {
			t.Errorf("a start that had to fail created database %s", name)
			testenv.DropDatabase(t, name)
		}
	})
	return testenv.WithDatabase(testenv.PostgresURL(), name)
}

// requireNoSpool fails the test if a start made a spool in dir.
func requireNoSpool(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, "spool")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a start that had to fail made its spool directory (%v)", err)
	}
}
