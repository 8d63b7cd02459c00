package e2e

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"smsgw/internal/testenv"
)

// receiver is a backend's webhook endpoint. It checks every delivery's
// signature with the Standard Webhooks library (an implementation
// independent of smsgw's), counts deliveries per webhook-id and keeps the
// first of each.
type receiver struct {
	*httptest.Server
	Secret string // "whsec_…"
	wh     *standardwebhooks.Webhook
	// failing answers 500 while set (after checking the signature).
	failing atomic.Bool

	mu     sync.Mutex
	count  map[string]int // webhook-id → deliveries answered 2xx
	events []webhookEvent
	forged int // deliveries whose signature did not verify
	failed int // deliveries answered 500
}

type webhookEvent struct {
	ID   string
	Type string         `json:"type"`
	Time time.Time      `json:"timestamp"`
	Data map[string]any `json:"data"`
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	key := make([]byte, 32)
	rand.Read(key)
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{Secret: secret, wh: wh, count: map[string]int{}}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.wh.Verify(body, req.Header); err != nil {
		r.forged++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if r.failing.Load() {
		r.failed++
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	id := req.Header.Get("webhook-id")
	r.count[id]++
	if r.count[id] == 1 {
		ev := webhookEvent{ID: id}
		if err := json.Unmarshal(body, &ev); err != nil {
			ev.Type = "unparsable: " + string(body)
		}
		r.events = append(r.events, ev)
	}
	w.WriteHeader(http.StatusNoContent)
}

// webhookConfig is the [[events.webhooks]] entry for r and the environment
// variable holding its secret, with retries a test can wait out.
func (r *receiver) webhookConfig() (string, []string) {
	return fmt.Sprintf(`
[events]
poll = "100ms"
retry_base = "200ms"
retry_max = "1s"
timeout = "2s"

[[events.webhooks]]
url = %q
secret_env = "E2E_WEBHOOK_SECRET"
`, r.URL), []string{"E2E_WEBHOOK_SECRET=" + r.Secret}
}

// received returns the events received so far (the first delivery of each
// id), and checks none came twice and none was forged.
func (r *receiver) received(t *testing.T) []webhookEvent {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.forged > 0 {
		t.Fatalf("%d deliveries with a bad signature", r.forged)
	}
	for id, n := range r.count {
		if n != 1 {
			t.Fatalf("event %s delivered %d times", id, n)
		}
	}
	return append([]webhookEvent(nil), r.events...)
}

// summary is "type:verification_id-suffix" per event, sorted, for comparing
// what arrived with what was caused.
func summary(evs []webhookEvent) string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type+"@"+fmt.Sprint(e.Data["verification_id"]))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// waitEvents waits until r has received want (as summary gives it).
func (r *receiver) waitEvents(t *testing.T, d time.Duration, want []string) []webhookEvent {
	t.Helper()
	sort.Strings(want)
	var got []webhookEvent
	testenv.WaitUntil(t, d, "the webhook events", func() error {
		got = r.received(t)
		if s := summary(got); s != strings.Join(want, " ") {
			return fmt.Errorf("got\n%s\nwant\n%s", s, strings.Join(want, " "))
		}
		return nil
	})
	return got
}
