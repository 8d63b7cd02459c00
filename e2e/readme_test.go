package e2e

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// runShell runs a README block with bash (stopping at the first failing
// command), against addr instead of localhost:8080.
func runShell(t *testing.T, block, addr string, env ...string) string {
	t.Helper()
	script := strings.ReplaceAll(block, "localhost:8080", addr)
	cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = t.TempDir()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("the README's block failed: %v\n%s\n--- block:\n%s", err, out.String(), script)
	}
	return out.String()
}

// TestReadmeCurlFlow runs the README's curl flow exactly as printed against
// smsgw -dev, and finds what its comments say the reader will see.
func TestReadmeCurlFlow(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed to run the README as printed")
	}
	block := markedBlocks(t, "README.md", "runs this block as printed against smsgw -dev")[0]
	p := startDev(t, "")
	out := runShell(t, block, strings.TrimPrefix(p.URL, "http://"))
	requireSeen(t, out, expectedLines(block))
	if !strings.Contains(p.stderr.String(), "DEV text to +14155552671") {
		t.Fatalf("-dev did not print the text, as step 2 says:\n%s", p.stderr.String())
	}

	// What the README says of browsers: with no cors_origins a preflight
	// is 403, naming the key.
	req, _ := http.NewRequest(http.MethodOptions, p.URL+"/v1/otp/send", nil)
	req.Header.Set("Origin", "http://localhost:3000")
	req.Header.Set("Access-Control-Request-Method", "POST")
	r := roundTrip(t, req)
	if msg, _ := r.ErrorField("message").(string); r.Status != 403 || !strings.Contains(msg, "server.cors_origins") {
		t.Fatalf("preflight without cors_origins: %d %s", r.Status, r.Raw)
	}
}

// TestReadmeMakeRun runs the README's admin block as printed against smsgw
// started as make run starts it (examples/fake-provider.toml, real Redis
// and Postgres, an admin token).
func TestReadmeMakeRun(t *testing.T) {
	t.Parallel()
	block := markedBlocks(t, "README.md", "runs this block as printed against smsgw as make run starts it")[0]
	config, err := os.ReadFile("../examples/fake-provider.toml")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	p := start(t, e, string(config))
	out := runShell(t, block, strings.TrimPrefix(p.URL, "http://"), "SMSGW_ADMIN_TOKEN="+adminToken)
	for _, want := range []string{`"status":"pending"`, `Your verification code is`, `"windows":[`, `"kind":"send"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("the output lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, `"error"`) {
		t.Fatalf("a call failed:\n%s", out)
	}
}
