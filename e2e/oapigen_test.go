package e2e

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	// The generated client's runtime: imported here so that go.mod keeps
	// it at the version the check was made with (go mod tidy sees this).
	_ "github.com/oapi-codegen/runtime"
)

// oapigenProgram sends and verifies through the client oapi-codegen made
// from /openapi.json (package main, in the same directory), reading the
// code from the fake provider's outbox, also through it.
const oapigenProgram = `package main

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"regexp"
)

func main() {
	url, token, phone := os.Args[1], os.Args[2], os.Args[3]
	c, err := NewClientWithResponses(url)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	key := "oapigen-" + phone
	sent, err := c.SendWithResponse(ctx, &SendParams{IdempotencyKey: &key}, SendJSONRequestBody{Phone: phone})
	if err != nil || sent.JSON202 == nil {
		log.Fatalf("send: %v %d %s", err, sent.StatusCode(), sent.Body)
	}
	bearer := func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+token)
		return nil
	}
	box, err := c.FakeMessagesWithResponse(ctx, &FakeMessagesParams{Phone: &phone}, bearer)
	if err != nil || box.JSON200 == nil || len(*box.JSON200) == 0 {
		log.Fatalf("outbox: %v %s", err, box.Body)
	}
	msgs := *box.JSON200
	code := regexp.MustCompile(` + "`\\b[0-9]{6}\\b`" + `).FindString(msgs[len(msgs)-1].Body)
	ok, err := c.VerifyWithResponse(ctx, VerifyJSONRequestBody{Phone: phone, Code: code})
	if err != nil || ok.JSON200 == nil {
		log.Fatalf("verify: %v %d %s", err, ok.StatusCode(), ok.Body)
	}
	v, err := c.GetVerificationWithResponse(ctx, sent.JSON202.VerificationId.String(), bearer)
	if err != nil || v.JSON200 == nil {
		log.Fatalf("verification: %v %d %s", err, v.StatusCode(), v.Body)
	}
	fmt.Println("approved", ok.JSON200.Phone, sent.JSON202.VerificationId, v.JSON200.Status)
}
`

// TestOpenAPIGenerator: a widely used Go generator (oapi-codegen, pinned as
// a tool in go.mod) accepts the OpenAPI 3.1 document the binary serves as
// it is; the client it makes compiles, and sends and verifies through the
// binary.
func TestOpenAPIGenerator(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := start(t, e, "")
	res, err := http.Get(p.URL + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("/openapi.json: %d %v", res.StatusCode, err)
	}
	// Inside this module (testdata is left out of ./...), so the generated
	// code builds against the runtime go.mod pins.
	if err := os.MkdirAll("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("testdata", "oapigen-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	writeFile(t, filepath.Join(dir, "openapi.json"), string(spec))
	writeFile(t, filepath.Join(dir, "main.go"), oapigenProgram)
	run := func(what string, args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", what, err, out)
		}
		return string(out)
	}
	run("oapi-codegen refuses the document", "tool", "oapi-codegen", "-generate", "types,client", "-package", "main",
		"-o", filepath.Join(dir, "client.gen.go"), filepath.Join(dir, "openapi.json"))
	bin := filepath.Join(t.TempDir(), "oapigen")
	run("the generated client does not build", "build", "-o", bin, "./"+dir)
	out, err := exec.Command(bin, p.URL, adminToken, "+14155550150").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "approved +14155550150 ") || !strings.HasSuffix(strings.TrimSpace(string(out)), " approved") {
		t.Fatalf("send and verify through the generated client: %v\n%s", err, out)
	}
}
