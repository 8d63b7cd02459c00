// Package e2e builds the smsgw binary, runs it as real processes against real
// Redis and Postgres, and drives it over HTTP only.
package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"smsgw/internal/testenv"
)

var binary string

const (
	secret     = "e2e-secret-0123456789abcdefghijklmnopqrstuvwxyz"
	adminToken = "e2e-admin-token"
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "smsgw-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "smsgw")
	build := exec.Command("go", "build", "-race", "-o", binary, "../cmd/smsgw")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build smsgw:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// env is one test's share of Redis and Postgres, used by all its processes.
type env struct {
	redisURL    string
	keyPrefix   string
	redisTOML   string // more [redis] keys: a topology's addresses
	databaseURL string
}

// db connects to the test's database; the caller closes the connection.
func (e env) db(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), e.databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

func newEnv(t *testing.T) env {
	t.Helper()
	_, prefix := testenv.Redis(t) // checks Redis and cleans the prefix up
	return env{redisURL: testenv.RedisURL(), keyPrefix: prefix, databaseURL: testenv.Database(t)}
}

type process struct {
	dir    string // working directory: the spool lives in dir/spool
	URL    string
	cmd    *exec.Cmd
	stderr *testenv.Buffer
	exited chan error
}

// start runs smsgw with config (TOML added to a file of the test's own) and
// waits until it answers /healthz.
func start(t *testing.T, e env, config string, args ...string) *process {
	t.Helper()
	return startWith(t, e, config, nil, args...)
}

// startIn is start in a given working directory (where the spool lives).
func startIn(t *testing.T, e env, config, dir string) *process {
	t.Helper()
	return startWithIn(t, e, config, nil, dir)
}

// startWith is start with more environment variables.
func startWith(t *testing.T, e env, config string, extraEnv []string, args ...string) *process {
	t.Helper()
	return startWithIn(t, e, config, extraEnv, "", args...)
}

func startWithIn(t *testing.T, e env, config string, extraEnv []string, dir string, args ...string) *process {
	t.Helper()
	return startFile(t, e, writeConfig(t, e, config), extraEnv, dir, args...)
}

// writeConfig writes a config file of the test's own: its Redis key prefix,
// the fake provider unless config has a [sender] table, a Redis timeout a loaded machine running -race stays within (unless the
// topology sets its own), and config.
func writeConfig(t *testing.T, e env, config string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "smsgw.toml")
	redisTOML := e.redisTOML
	if !strings.Contains(redisTOML, "timeout") {
		redisTOML = "timeout = \"5s\"\n" + redisTOML
	}
	full := fmt.Sprintf("[redis]\nkey_prefix = %q\n%s\n\n%s", e.keyPrefix, redisTOML, config)
	if !strings.Contains(config, "[sender]") {
		// The fake provider runs outside -dev only when named, and with no
		// [pumping] mode named it puts the rules in shadow mode: these
		// tests name enforce unless they name a mode of their own.
		full = "[sender]\nprovider = \"fake\"\n\n" + enforcePumping(full)
	}
	if err := os.WriteFile(path, []byte(full), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// enforcePumping is config with [pumping] mode = "enforce" unless it names
// a mode.
func enforcePumping(config string) string {
	head, rest, ok := strings.Cut(config, "[pumping]\n")
	if !ok {
		return config + "\n[pumping]\nmode = \"enforce\"\n"
	}
	if section, _, _ := strings.Cut(rest, "\n["); strings.Contains(section, "mode =") || strings.HasPrefix(rest, "mode =") {
		return config
	}
	return head + "[pumping]\nmode = \"enforce\"\n" + rest
}

// startFile runs smsgw with the config file at path, in dir (a new
// directory when empty), and waits until it answers /healthz.
func startFile(t *testing.T, e env, path string, extraEnv []string, dir string, args ...string) *process {
	t.Helper()
	env := append([]string{
		"SMSGW_REDIS_URL=" + e.redisURL,
		"SMSGW_DATABASE_URL=" + e.databaseURL,
		"SMSGW_SECRET=" + secret,
		"SMSGW_ADMIN_TOKEN=" + adminToken,
	}, extraEnv...)
	// The port is free when it is chosen, not when smsgw binds it, seconds
	// later on a loaded machine: another process may take it in between.
	// smsgw then exits at once, and a new port is tried.
	for try := 1; ; try++ {
		p := launch(t, append([]string{"-config", path}, args...), env, dir)
		err := p.awaitAnswer(t, 60*time.Second, "/healthz", "smsgw to come up")
		if err == nil {
			// A port is reused: an earlier test's smsgw, killed, may have
			// had it seconds ago, and a pooled connection to it that the
			// transport has not yet seen closed would carry this one's
			// first requests into an EOF (once, at load 5: a POST, which
			// the transport does not retry).
			closeIdleConnections()
			return p
		}
		if try == 3 || !strings.Contains(p.stderr.String(), "address already in use") {
			t.Fatal(err)
		}
		t.Logf("port taken before smsgw bound it, trying another: %v", err)
	}
}

// launch starts smsgw with args and env (beside a free loopback
// SMSGW_LISTEN) in dir (a new directory when empty); it is killed when the
// test ends, if it still runs, and its output logged if the test failed.
func launch(t *testing.T, args, env []string, dir string) *process {
	t.Helper()
	addr := testenv.FreeAddr(t)
	cmd := exec.Command(binary, args...)
	cmd.Env = append(append(os.Environ(), "SMSGW_LISTEN="+addr), env...)
	// Each process works in a directory of its own: its audit spool is there.
	cmd.Dir = dir
	if cmd.Dir == "" {
		cmd.Dir = t.TempDir()
	}
	p := &process{URL: "http://" + addr, cmd: cmd, stderr: &testenv.Buffer{}, exited: make(chan error, 1), dir: cmd.Dir}
	cmd.Stdout, cmd.Stderr = p.stderr, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-p.exited
		}
		closeIdleConnections()
		if t.Failed() {
			t.Logf("smsgw %s output:\n%s", addr, p.stderr.String())
		}
	})
	return p
}

// waitAnswers waits up to d (what it waits for) until GET path answers 200;
// smsgw exiting meanwhile fails the test at once.
func (p *process) waitAnswers(t *testing.T, d time.Duration, path, what string) {
	t.Helper()
	if err := p.awaitAnswer(t, d, path, what); err != nil {
		t.Fatal(err)
	}
}

// awaitAnswer waits up to d until GET path answers 200 from this process:
// the answer counts only once the process says it listens on its own
// address, so a 200 from another process that took the port first is never
// mistaken for it. It returns an error when the process exits meanwhile.
func (p *process) awaitAnswer(t *testing.T, d time.Duration, path, what string) error {
	t.Helper()
	var exited error
	testenv.WaitUntil(t, d, what, func() error {
		select {
		case err := <-p.exited:
			p.exited <- err // for stop and the cleanup
			exited = fmt.Errorf("smsgw exited at start: %v\n%s", err, p.stderr.String())
			return nil
		default:
		}
		if !p.listening() {
			return fmt.Errorf("smsgw does not say it listens on %s yet:\n%s", p.URL, p.stderr.String())
		}
		if testenv.GetOK(p.URL + path) {
			return nil
		}
		return fmt.Errorf("no 200 from %s yet:\n%s", path, p.stderr.String())
	})
	return exited
}

// listening says whether the process has logged that it listens on its
// own address.
func (p *process) listening() bool {
	addr := strings.TrimPrefix(p.URL, "http://")
	for _, line := range p.stderr.JSONLines() {
		if line["msg"] == "smsgw listening" && line["addr"] == addr {
			return true
		}
	}
	return false
}

// stop sends SIGTERM and requires a clean exit.
func (p *process) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			t.Fatalf("smsgw exited with %v after SIGTERM:\n%s", err, p.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("smsgw did not stop within 30s of SIGTERM")
	}
}

type response = testenv.Response

var client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 200}}

// closeIdleConnections drops the test clients' pooled connections, which
// may lead to a process that is gone (see startFile).
func closeIdleConnections() {
	client.CloseIdleConnections()
	person.CloseIdleConnections()
}

func post(t *testing.T, url, body string, header map[string]string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return roundTrip(t, req)
}

func get(t *testing.T, url string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return roundTrip(t, req)
}

func roundTrip(t *testing.T, req *http.Request) response {
	t.Helper()
	return testenv.Do(t, client, req)
}

type auditRow struct {
	Kind, Outcome, RequestID string
	Phone, ClientIP, Reason  *string
	Provider, MessageID      *string
	Count                    int // requests the row stands for (a rollup: more than 1)
}

// auditRows reads the audit table of the test's database, oldest first.
func auditRows(t *testing.T, e env) []auditRow {
	t.Helper()
	ctx := context.Background()
	conn := e.db(t)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT kind, outcome, request_id, phone_e164, host(client_ip), reason, provider, provider_message_id, count
		FROM audit_log ORDER BY created_at, id`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (auditRow, error) {
		var a auditRow
		err := r.Scan(&a.Kind, &a.Outcome, &a.RequestID, &a.Phone, &a.ClientIP, &a.Reason, &a.Provider, &a.MessageID, &a.Count)
		return a, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}
