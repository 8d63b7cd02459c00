package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"smsgw/internal/testenv"
)

func TestDevModeNeedsNothing(t *testing.T) {
	t.Parallel()
	addr := testenv.FreeAddr(t)
	cmd := exec.Command(binary, "-dev")
	// Outside services that do not exist: dev mode must not touch them.
	cmd.Env = append(os.Environ(), "SMSGW_LISTEN="+addr, "SMSGW_REDIS_URL=redis://127.0.0.1:1/0", "SMSGW_DATABASE_URL=postgres://nobody@127.0.0.1:1/x")
	cmd.Dir = t.TempDir()
	stderr := &testenv.Buffer{}
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		if t.Failed() {
			t.Logf("output:\n%s", stderr.String())
		}
	})
	url := "http://" + addr
	testenv.WaitUntil(t, 20*time.Second, "dev mode to become ready", func() error {
		if r, err := client.Get(url + "/readyz"); err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				return nil
			}
		}
		return fmt.Errorf("not ready:\n%s", stderr.String())
	})
	r := post(t, url+"/v1/otp/send", `{"phone": "+447400123456"}`, nil)
	if r.Status != 202 {
		t.Fatalf("send: %d %s", r.Status, r.Raw)
	}
	if r := post(t, url+"/v1/otp/send", `{"phone": "+447400123456"}`, nil); r.Status != 429 {
		t.Fatalf("the in-process Redis must run the same limits: %d %s", r.Status, r.Raw)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := <-exited; err != nil {
		t.Fatalf("exit: %v", err)
	}
	out := stderr.String()
	if !strings.Contains(out, "DEV MODE") || !strings.Contains(out, "DEV text to +447400123456") {
		t.Fatalf("no banner or printed text:\n%s", out)
	}
	var outcomes []string
	for _, row := range stderr.JSONLines() {
		if row["audit"] == "audit_log" {
			outcomes = append(outcomes, row["outcome"].(string))
		}
	}
	// A send's row is printed as it becomes durable: sending before the
	// text, then its final outcome.
	if strings.Join(outcomes, ",") != "sending,sent,rate_limited" {
		t.Fatalf("audit lines: %v", outcomes)
	}
}

func TestDevModeRefusesNonLoopback(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binary, "-dev")
	cmd.Env = append(os.Environ(), "SMSGW_LISTEN=0.0.0.0:0")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "loopback") {
		t.Fatalf("dev mode on 0.0.0.0: %v %s", err, out)
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}
