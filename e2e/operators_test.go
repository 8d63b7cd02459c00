package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"

	"smsgw/api/openapi"
	"smsgw/internal/testenv"
)

// TestOperatorsSurface: what the binary serves operators and browsers
// besides the API: the contract, the console, CORS, the admin token
// throttle, and the healthcheck command a container runs.
func TestOperatorsSurface(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := start(t, e, "[server]\ncors_origins = [\"https://signup.example.com\"]\n[pumping]\nmode = \"off\"\n")

	t.Run("openapi.json is the document in the repository", func(t *testing.T) {
		r := get(t, p.URL+"/openapi.json")
		if r.Status != 200 || !bytes.Equal(r.Raw, openapi.JSON) {
			t.Fatalf("%d, %d bytes; want the embedded document", r.Status, len(r.Raw))
		}
		var doc struct {
			OpenAPI string         `json:"openapi"`
			Paths   map[string]any `json:"paths"`
		}
		if err := json.Unmarshal(r.Raw, &doc); err != nil || doc.OpenAPI != "3.1.0" {
			t.Fatalf("openapi %q: %v", doc.OpenAPI, err)
		}
		for _, path := range []string{"/v1/otp/send", "/v1/otp/verify", "/healthz", "/readyz", "/metrics", "/openapi.json",
			"/console", "/v1/admin/limits", "/v1/admin/audit", "/v1/fake/messages"} {
			if doc.Paths[path] == nil {
				t.Errorf("the document lacks %s", path)
			}
		}
	})

	t.Run("console", func(t *testing.T) {
		r := get(t, p.URL+"/console")
		if r.Status != 200 || !strings.Contains(string(r.Raw), "Admin token") || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("%d %s %.300s", r.Status, r.Header.Get("Content-Type"), r.Raw)
		}
		css := get(t, p.URL+"/console/assets/console.css")
		if css.Status != 200 || !strings.Contains(string(css.Raw), "svg.chart") {
			t.Fatalf("embedded stylesheet: %d", css.Status)
		}
		res, err := client.PostForm(p.URL+"/console/signin", url.Values{"token": {adminToken}})
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 || res.Request.URL.Path != "/console" {
			t.Fatalf("sign-in ended at %d %s", res.StatusCode, res.Request.URL)
		}
	})

	t.Run("CORS", func(t *testing.T) {
		for _, tt := range []struct {
			origin string
			status int
		}{{"https://signup.example.com", 204}, {"https://evil.example", 403}} {
			req, _ := http.NewRequest(http.MethodOptions, p.URL+"/v1/otp/send", nil)
			req.Header.Set("Origin", tt.origin)
			req.Header.Set("Access-Control-Request-Method", "POST")
			req.Header.Set("Access-Control-Request-Headers", "content-type")
			r := roundTrip(t, req)
			if r.Status != tt.status {
				t.Fatalf("preflight from %s: %d", tt.origin, r.Status)
			}
			if got := r.Header.Get("Access-Control-Allow-Origin"); (tt.status == 204) != (got == tt.origin) {
				t.Fatalf("preflight from %s: Allow-Origin %q", tt.origin, got)
			}
		}
		r := post(t, p.URL+"/v1/otp/send", `{"phone":"+14155552671"}`, map[string]string{"Origin": "https://signup.example.com"})
		if r.Status != 202 || r.Header.Get("Access-Control-Allow-Origin") != "https://signup.example.com" ||
			!strings.Contains(r.Header.Get("Access-Control-Expose-Headers"), "Retry-After") {
			t.Fatalf("send from the allowed origin: %d %v", r.Status, r.Header)
		}
	})

	t.Run("wrong admin tokens are throttled", func(t *testing.T) {
		var last testenv.Response
		for range 11 {
			req, _ := http.NewRequest(http.MethodGet, p.URL+"/v1/admin/limits?ip=192.0.2.1", nil)
			req.Header.Set("Authorization", "Bearer guess")
			last = roundTrip(t, req)
		}
		if last.Status != http.StatusTooManyRequests || last.Header.Get("Retry-After") == "" {
			t.Fatalf("the 11th wrong token: %d %v", last.Status, last.Header)
		}
	})

	t.Run("healthcheck", func(t *testing.T) {
		for _, tt := range []struct {
			listen string
			ok     bool
		}{{strings.TrimPrefix(p.URL, "http://"), true}, {testenv.FreeAddr(t), false}} {
			cmd := exec.Command(binary, "healthcheck")
			cmd.Env = append(cmd.Environ(), "SMSGW_LISTEN="+tt.listen)
			out, err := cmd.CombinedOutput()
			if (err == nil) != tt.ok {
				t.Fatalf("healthcheck of %s: %v\n%s", tt.listen, err, out)
			}
		}
	})
}

func TestHelpAndConfigErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		out, err := exec.Command(binary, args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "migrate") || !strings.Contains(string(out), "healthcheck") {
			t.Fatalf("smsgw %v: %v\n%s", args, err, out)
		}
	}
	for _, tt := range []struct {
		env  string
		want string
	}{
		{"SMSGW_DATABASE_URL=mysql://x", "SMSGW_DATABASE_URL"},
		{"SMSGW_LISTEN=8080", "SMSGW_LISTEN"},
	} {
		cmd := exec.Command(binary, "migrate")
		cmd.Env = append(cmd.Environ(), tt.env)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tt.want) {
			t.Fatalf("%s: %v\n%s", tt.env, err, out)
		}
	}
}
