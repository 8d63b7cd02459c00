package app

import (
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"smsgw/internal/testenv"
	"smsgw/otp"
)

// autofillDoc is docs/autofill.md, read from the package directory.
func autofillDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/autofill.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// blockAfter is the fenced block that follows the first line containing
// marker at or after the start of doc, and the rest of doc after it.
func blockAfter(t *testing.T, doc, marker string) (block, rest string) {
	t.Helper()
	_, after, ok := strings.Cut(doc, marker)
	_, after, ok2 := strings.Cut(after, "```")
	_, after, ok3 := strings.Cut(after, "\n") // the fence's info string
	block, rest, ok4 := strings.Cut(after, "```")
	if !ok || !ok2 || !ok3 || !ok4 {
		t.Fatalf("docs/autofill.md has no block after %q", marker)
	}
	return block, rest
}

// sample is a doc example's settings: what a request and its API key ask.
type sample struct {
	Locale       string `json:"locale"`
	Country      string `json:"country"`
	AppName      string `json:"app_name"`
	WebOTPDomain string `json:"webotp_domain"`
	AppHash      string `json:"app_hash"`
	Code         string `json:"code"`
}

// Every text docs/autofill.md shows ("<!-- rendered: {settings} -->" and the
// block after it) is what the shipped configuration renders for those
// settings, byte for byte; the doc cannot drift from the renderer.
func TestAutofillDocTextsAreRendered(t *testing.T) {
	cfg, err := LoadConfig("", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	const marker = "<!-- rendered: "
	doc, n := autofillDoc(t), 0
	for strings.Contains(doc, marker) {
		_, after, _ := strings.Cut(doc, marker)
		settings, _, _ := strings.Cut(after, " -->")
		var s sample
		if err := json.Unmarshal([]byte(settings), &s); err != nil {
			t.Fatalf("settings %s: %v", settings, err)
		}
		var block string
		block, doc = blockAfter(t, doc, marker)
		o := otp.TextOptions{Locale: s.Locale, App: s.AppName, WebOTPDomain: s.WebOTPDomain}
		if s.AppHash != "" {
			// A request's app_hash, as the API checks it.
			o.AppHash = s.AppHash
			if err := cfg.messages.CheckAppHash(o, s.Country, len(s.Code)); err != nil {
				t.Errorf("%s: %v", settings, err)
			}
		}
		text, _, err := cfg.messages.RenderSMS(o, s.Country, s.Code)
		if err != nil {
			t.Fatal(err)
		}
		if block != text+"\n" {
			t.Errorf("docs/autofill.md shows for %s:\n%s\nthe renderer makes:\n%s", settings, block, text)
		}
		n++
	}
	if n < 5 {
		t.Fatalf("docs/autofill.md shows %d rendered texts, want every setting's", n)
	}
}

// sizeRows are the rows of docs/autofill.md's table of shipped texts: each
// language's encoding and length alone, with a 12-character app name and a
// WebOTP line (a web page's key), with the app name and an app hash (an
// Android app's key), and with all three, in that encoding's units of its
// one-segment limit.
func sizeRows(t *testing.T) string {
	t.Helper()
	cfg, err := LoadConfig("", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	n := cfg.OTP.Length
	plain := cfg.messages.Sizes(n, otp.TextOptions{})
	branded := cfg.messages.Sizes(n, otp.TextOptions{App: "Acme Rockets", WebOTPDomain: "example.com"})
	android := cfg.messages.Sizes(n, otp.TextOptions{App: "Acme Rockets", AppHash: "FA+9qCX9VSu"})
	both := cfg.messages.Sizes(n, otp.TextOptions{App: "Acme Rockets", WebOTPDomain: "example.com", AppHash: "FA+9qCX9VSu"})
	cell := func(s otp.TextSize) string {
		limit := map[string]int{"GSM-7": 160, "UCS-2": 70}[s.Encoding]
		if s.Segments > 1 {
			return fmt.Sprintf("**%d/%d: %d segments**", s.Units, limit, s.Segments)
		}
		return fmt.Sprintf("%d/%d", s.Units, limit)
	}
	var b strings.Builder
	for i := range plain {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", cmp.Or(plain[i].Locale, "otp.message (English)"), plain[i].Encoding,
			cell(plain[i]), cell(branded[i]), cell(android[i]), cell(both[i]))
	}
	return b.String()
}

// The table of shipped texts in docs/autofill.md is the renderer's.
func TestAutofillDocSizesAreMeasured(t *testing.T) {
	doc := autofillDoc(t)
	_, after, ok := strings.Cut(doc, "|---|---|---|---|---|---|\n")
	table, _, _ := strings.Cut(after, "\n\n")
	if want := sizeRows(t); !ok || table+"\n" != want {
		t.Fatalf("docs/autofill.md's table of shipped texts is not what they measure; it should read:\n%s", want)
	}
}

// The doc's recipe for an app's hash, run as printed on a keystore made
// here, gives what Google's rule gives: the first 11 characters of the
// base64 of SHA-256 over "<package> <certificate as lowercase hex>".
func TestAutofillDocAppHashRecipe(t *testing.T) {
	if _, err := exec.LookPath("keytool"); err != nil {
		testenv.Unavailable(t, "keytool", err)
	}
	doc := autofillDoc(t)
	_, hashPart, _ := strings.Cut(doc, "### Computing an app's hash")
	importing, rest := blockAfter(t, hashPart, "Play Console's app signing page")
	recipe, _ := blockAfter(t, rest, "TestAutofillDocAppHashRecipe")
	dir := t.TempDir()
	keytool := func(args ...string) {
		t.Helper()
		cmd := exec.Command("keytool", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("keytool %v: %v\n%s", args, err, out)
		}
	}
	// An app signing key of the test's own, its certificate as Play
	// Console hands it out (DER).
	const pass = "storepass-for-tests"
	keytool("-genkeypair", "-keystore", "signing.keystore", "-alias", "app", "-keyalg", "EC",
		"-dname", "CN=smsgw test", "-storepass", pass, "-keypass", pass, "-validity", "2")
	keytool("-exportcert", "-keystore", "signing.keystore", "-alias", "app", "-storepass", pass, "-file", "deployment_cert.der")
	der, err := os.ReadFile(filepath.Join(dir, "deployment_cert.der"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("com.example.myapp " + hex.EncodeToString(der)))
	want := base64.StdEncoding.EncodeToString(sum[:])[:11]

	var out []byte
	for _, block := range []string{importing, recipe} {
		cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", block)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "STOREPASS="+pass)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if out, err = cmd.Output(); err != nil {
			t.Fatalf("the block failed: %v\n%s\n--- block:\n%s", err, stderr.String(), block)
		}
	}
	if got := strings.TrimSpace(string(out)); got != want || !otp.ValidAppHash(got) {
		t.Fatalf("the recipe printed %q, want %q", got, want)
	}
}
