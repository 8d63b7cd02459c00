package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"smsgw/internal/testenv"
)

// TestBackendRecipes builds and runs each backend of docs/backend.md, as
// printed, against the binary: a person at 127.0.0.2 signs up through the
// backend at 127.0.0.1, and smsgw counts and audits the person's address.
// The Go backend, on package client, also takes smsgw's signed events.
func TestBackendRecipes(t *testing.T) {
	t.Parallel()
	goMod := markedBlocks(t, "docs/backend.md", "builds the program below with this go.mod")[0]
	goProgram := markedBlocks(t, "docs/backend.md", "builds and runs this program")[0]
	nodeProgram := markedBlocks(t, "docs/backend.md", "runs this program with node")[0]
	if snippet := markedBlocks(t, "README.md", "is the one in docs/backend.md")[0]; !strings.Contains(nodeProgram, snippet) {
		t.Fatalf("the README's recipe is not the one docs/backend.md runs:\n%s", snippet)
	}
	e := newEnv(t)
	// smsgw's events go to the Go backend, at an address chosen first.
	key := make([]byte, 32)
	rand.Read(key)
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	goAddr := testenv.FreeAddr(t)
	p := startWith(t, e, backendConfig()+fmt.Sprintf(`
[events]
poll = "100ms"
retry_base = "200ms"
retry_max = "1s"

[[events.webhooks]]
url = "http://%s/smsgw/events"
secret_env = "E2E_WEBHOOK_SECRET"
types = ["verification.approved"]
`, goAddr), []string{"E2E_WEBHOOK_SECRET=" + secret})

	t.Run("go", func(t *testing.T) {
		// As the page has it: the backend's module beside a checkout named
		// smsgw (here a link to this repository).
		dir := t.TempDir()
		root, err := filepath.Abs("..")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(root, filepath.Join(dir, "smsgw")); err != nil {
			t.Fatal(err)
		}
		mod := filepath.Join(dir, "backend")
		if err := os.Mkdir(mod, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(mod, "go.mod"), goMod)
		writeFile(t, filepath.Join(mod, "main.go"), goProgram)
		bin := filepath.Join(dir, "backend-bin")
		build := exec.Command("go", "build", "-o", bin, ".")
		build.Dir = mod
		build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("the Go recipe does not build: %v\n%s", err, out)
		}
		url, out := startBackendAt(t, p, goAddr, []string{"SMSGW_WEBHOOK_SECRET=" + secret}, bin)
		driveBackend(t, e, p, url, "+14155550140")
		testenv.WaitFor(t, 60*time.Second, "the backend to log the approval event", func() bool {
			return strings.Contains(out.String(), "event verification.approved ") && strings.Contains(out.String(), " +14155550140 ")
		})
	})
	t.Run("node", func(t *testing.T) {
		node, err := exec.LookPath("node")
		if err != nil {
			t.Fatal("node is needed to run the Node recipe")
		}
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "backend.mjs"), nodeProgram)
		url, _ := startBackendAt(t, p, testenv.FreeAddr(t), nil, node, filepath.Join(dir, "backend.mjs"))
		driveBackend(t, e, p, url, "+14155550141")
	})
}

// startBackendAt runs a recipe's backend in front of p, listening on addr
// with env added, and waits until it listens. It returns its URL and its
// output so far.
func startBackendAt(t *testing.T, p *process, addr string, env []string, command ...string) (string, *testenv.Buffer) {
	t.Helper()
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Env = append(append(os.Environ(), "LISTEN="+addr, "SMSGW_URL="+p.URL, "SMSGW_API_KEY="+backendKey), env...)
	out := &testenv.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("backend output:\n%s", out)
		}
	})
	testenv.WaitFor(t, 30*time.Second, "the backend to listen", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return "http://" + addr, out
}

// person is a browser at 127.0.0.2, another address than the backend's.
var person = &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{
	DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext,
}}

func driveBackend(t *testing.T, e env, p *process, backend, phone string) {
	t.Helper()
	call := func(path, body string) response {
		t.Helper()
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, backend+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		res, err := person.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var r response
		r.Status, r.Header = res.StatusCode, res.Header
		if r.Raw, err = io.ReadAll(res.Body); err != nil {
			t.Fatal(err)
		}
		_ = json.Unmarshal(r.Raw, &r.Body)
		return r
	}
	if r := call("/signup/send-code", `{"phone": "`+phone+`"}`); r.Status != 202 || r.Body["phone"] != phone {
		t.Fatalf("send: %d %s", r.Status, r.Raw)
	}
	again := call("/signup/send-code", `{"phone": "`+phone+`"}`)
	if again.Status != 429 || again.ErrorCode() != "rate_limited" || again.Header.Get("Retry-After") == "" {
		t.Fatalf("a second send: %d %v %s", again.Status, again.Header, again.Raw)
	}
	if r := call("/signup/check-code", `{"phone": "`+phone+`", "code": "000000"}`); r.Status != 422 || r.ErrorField("attempts_left") == nil {
		t.Fatalf("a wrong code: %d %s", r.Status, r.Raw)
	}
	bodies := outboxBodies(t, p, phone)
	if len(bodies) != 1 {
		t.Fatalf("outbox: %v", bodies)
	}
	if r := call("/signup/check-code", `{"phone": "`+phone+`", "code": "`+codeIn(bodies[0])+`"}`); r.Status != 200 || r.Body["status"] != "approved" {
		t.Fatalf("the right code: %d %s", r.Status, r.Raw)
	}
	testenv.WaitFor(t, 30*time.Second, "the audit rows", func() bool {
		n := 0
		for _, row := range auditRows(t, e) {
			if deref(row.Phone) == phone {
				if deref(row.ClientIP) != "127.0.0.2" {
					t.Fatalf("audit row %+v: want the person's address 127.0.0.2", row)
				}
				n++
			}
		}
		return n >= 4 // sent, rate_limited, invalid_code, approved
	})
}
