package e2e

import (
	"context"
	"encoding/json"
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
func TestBackendRecipes(t *testing.T) {
	t.Parallel()
	goProgram := markedBlocks(t, "docs/backend.md", "builds and runs this program")[0]
	nodeProgram := markedBlocks(t, "docs/backend.md", "runs this program with node")[0]
	if snippet := markedBlocks(t, "README.md", "is the one in docs/backend.md")[0]; !strings.Contains(nodeProgram, snippet) {
		t.Fatalf("the README's recipe is not the one docs/backend.md runs:\n%s", snippet)
	}
	e := newEnv(t)
	p := start(t, e, backendConfig())

	t.Run("go", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "main.go"), goProgram)
		bin := filepath.Join(dir, "backend")
		build := exec.Command("go", "build", "-o", bin, "main.go")
		build.Dir = dir
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("the Go recipe does not build: %v\n%s", err, out)
		}
		driveBackend(t, e, p, startBackend(t, p, bin), "+14155550140")
	})
	t.Run("node", func(t *testing.T) {
		node, err := exec.LookPath("node")
		if err != nil {
			t.Fatal("node is needed to run the Node recipe")
		}
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "backend.mjs"), nodeProgram)
		driveBackend(t, e, p, startBackend(t, p, node, filepath.Join(dir, "backend.mjs")), "+14155550141")
	})
}

// startBackend runs a recipe's backend in front of p and waits until it
// listens.
func startBackend(t *testing.T, p *process, command ...string) string {
	t.Helper()
	addr := testenv.FreeAddr(t)
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Env = append(os.Environ(), "LISTEN="+addr, "SMSGW_URL="+p.URL, "SMSGW_API_KEY="+backendKey)
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
	return "http://" + addr
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
