package e2e

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestDevModeNeedsNothing(t *testing.T) {
	t.Parallel()
	// Outside services that do not exist: dev mode must not touch them.
	p := launch(t, []string{"-dev"}, []string{"SMSGW_REDIS_URL=redis://127.0.0.1:1/0", "SMSGW_DATABASE_URL=postgres://nobody@127.0.0.1:1/x"}, "")
	p.waitAnswers(t, 20*time.Second, "/readyz", "dev mode to become ready")
	url := p.URL
	r := post(t, url+"/v1/otp/send", `{"phone": "+447400123456"}`, nil)
	if r.Status != 202 {
		t.Fatalf("send: %d %s", r.Status, r.Raw)
	}
	if r := post(t, url+"/v1/otp/send", `{"phone": "+447400123456"}`, nil); r.Status != 429 {
		t.Fatalf("the in-process Redis must run the same limits: %d %s", r.Status, r.Raw)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-p.exited; err != nil {
		t.Fatalf("exit: %v", err)
	}
	out := p.stderr.String()
	if !strings.Contains(out, "DEV MODE") || !strings.Contains(out, "DEV text to +447400123456") {
		t.Fatalf("no banner or printed text:\n%s", out)
	}
	var outcomes []string
	for _, row := range p.stderr.JSONLines() {
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
