package apptest_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"smsgw/client"
	"smsgw/internal/app"
	"smsgw/internal/app/apptest"
	"smsgw/internal/testenv"
)

// clientKey is the secret API key the client test calls with.
const clientKey = "apptest-client-key-0123456789abcdef"

// TestClientAgainstTheService drives package client against the real
// service (Redis, Postgres, the fake provider): send with client_ip and
// limit_keys, the typed refusals, a replayed Idempotency-Key, verify with
// the texted code, look up and cancel; and the events smsgw pushes, checked
// by the client's own webhook verifier.
func TestClientAgainstTheService(t *testing.T) {
	raw := make([]byte, 32)
	rand.Read(raw)
	secret := "whsec_" + base64.StdEncoding.EncodeToString(raw)
	hook, err := client.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]int{} // webhook-id → deliveries
	var got []string         // "type@verification_id", one per id
	receiver := httptest.NewServer(hook.Handler(func(_ context.Context, e client.Event) error {
		v, err := e.Verification()
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if seen[e.ID]++; seen[e.ID] == 1 {
			got = append(got, e.Type+"@"+v.VerificationID)
		}
		return nil
	}))
	defer receiver.Close()

	db := testenv.MigratedDatabase(t)
	digest := sha256.Sum256([]byte(clientKey))
	s := apptest.New(t, apptest.Options{Postgres: db, Config: func(c *app.Config) {
		c.API.Keys = []app.APIKey{{Name: "client-backend", SHA256: hex.EncodeToString(digest[:]), Enabled: true, ForwardClientIP: true}}
		c.Limits.Key = []app.KeyLimit{{Name: "user_id", Window: app.Duration{Duration: time.Hour}, Max: 2}}
		c.Events.Poll.Duration, c.Events.RetryBase.Duration, c.Events.RetryMax.Duration = 100*time.Millisecond, 200*time.Millisecond, time.Second
		c.Events.Webhooks = []app.WebhookConfig{{URL: receiver.URL, SecretEnv: "APPTEST_WEBHOOK_SECRET", Secret: secret}}
	}})
	c, err := client.New(s.URL, client.WithAPIKey(clientKey))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const alice, bob, carol, dave = "+14155550161", "+14155550162", "+14155550163", "+14155550164"
	user := map[string]string{"user_id": "u_" + testenv.Unique()}

	sent, err := c.Send(ctx, client.SendRequest{Phone: "+1 (415) 555-0161", ClientIP: "203.0.113.61", LimitKeys: user})
	if err != nil || sent.Phone != alice || sent.VerificationID == "" || sent.ExpiresIn != 10*time.Minute || sent.Replayed {
		t.Fatalf("send: %+v %v", sent, err)
	}
	if ip := auditClientIP(t, db, alice); ip != "203.0.113.61" {
		t.Fatalf("the audit row's client_ip is %q, want the forwarded 203.0.113.61", ip)
	}
	var rl *client.RateLimited
	if _, err := c.Send(ctx, client.SendRequest{Phone: alice, ClientIP: "203.0.113.61"}); !errors.As(err, &rl) ||
		rl.Scope != "phone" || rl.RetryAfter <= 0 || rl.RetryAfter > time.Minute {
		t.Fatalf("a second send to the number: %v", err)
	}
	bobSent, err := c.Send(ctx, client.SendRequest{Phone: bob, ClientIP: "203.0.113.62", LimitKeys: user})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, client.SendRequest{Phone: carol, ClientIP: "203.0.113.63", LimitKeys: user}); !errors.As(err, &rl) ||
		rl.Scope != "key" || rl.Key != "user_id" || rl.Window != "1h" || rl.Limit != 2 {
		t.Fatalf("a third send for one user_id: %v", err)
	}
	var api *client.APIError
	if _, err := c.Send(ctx, client.SendRequest{Phone: carol, LimitKeys: map[string]string{"account": "a"}}); !errors.As(err, &api) ||
		api.Code != "invalid_request" || !strings.Contains(api.Message, "account") {
		t.Fatalf("an unknown limit key: %v", err)
	}

	// One Idempotency-Key, two calls: one text, the first answer again.
	first, err := c.Send(ctx, client.SendRequest{Phone: dave, IdempotencyKey: "apptest-" + testenv.Unique()})
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Send(ctx, client.SendRequest{Phone: dave, IdempotencyKey: first.IdempotencyKey})
	if err != nil || !again.Replayed || again.VerificationID != first.VerificationID || len(s.Outbox.Messages(dave)) != 1 {
		t.Fatalf("replay: %+v %v, %d texts", again, err, len(s.Outbox.Messages(dave)))
	}

	var wrong *client.InvalidCode
	if _, err := c.Verify(ctx, client.VerifyRequest{Phone: alice, Code: "000000", ClientIP: "203.0.113.61"}); !errors.As(err, &wrong) || wrong.AttemptsLeft != 4 {
		t.Fatalf("a wrong code: %v", err)
	}
	if res, err := c.Verify(ctx, client.VerifyRequest{Phone: alice, Code: lastCode(t, s.Outbox, alice), ClientIP: "203.0.113.61"}); err != nil || res.Status != "approved" || res.Phone != alice {
		t.Fatalf("the texted code: %+v %v", res, err)
	}
	var none *client.NoPendingCode
	if _, err := c.Verify(ctx, client.VerifyRequest{Phone: alice, Code: lastCode(t, s.Outbox, alice)}); !errors.As(err, &none) {
		t.Fatalf("a used code: %v", err)
	}
	v, err := c.GetVerification(ctx, sent.VerificationID)
	if err != nil || v.Status != "approved" || v.Phone != alice || v.Sends != 1 || v.VerificationID != sent.VerificationID {
		t.Fatalf("get: %+v %v", v, err)
	}

	canceled, err := c.Cancel(ctx, bobSent.VerificationID)
	if err != nil || canceled.Status != "canceled" {
		t.Fatalf("cancel: %+v %v", canceled, err)
	}
	if _, err := c.Verify(ctx, client.VerifyRequest{Phone: bob, Code: lastCode(t, s.Outbox, bob)}); !errors.As(err, &none) {
		t.Fatalf("verify after cancel: %v", err)
	}
	if again, err := c.Cancel(ctx, bobSent.VerificationID); err != nil || again.Status != "canceled" {
		t.Fatalf("cancel again: %+v %v", again, err)
	}
	var notPending *client.NotPending
	if _, err := c.Cancel(ctx, sent.VerificationID); !errors.As(err, &notPending) || notPending.Status != "approved" {
		t.Fatalf("cancel an approved one: %v", err)
	}
	var notFound *client.NotFound
	if _, err := c.GetVerification(ctx, "ver_nope"); !errors.As(err, &notFound) {
		t.Fatalf("an unknown id: %v", err)
	}
	anonymous, _ := client.New(s.URL)
	if _, err := anonymous.GetVerification(ctx, sent.VerificationID); !errors.As(err, &api) || api.StatusCode != 401 {
		t.Fatalf("without a key: %v", err)
	}

	want := []string{"verification.sent@" + sent.VerificationID, "verification.approved@" + sent.VerificationID,
		"verification.sent@" + bobSent.VerificationID, "verification.canceled@" + bobSent.VerificationID,
		"verification.sent@" + first.VerificationID}
	sort.Strings(want)
	testenv.WaitUntil(t, 60*time.Second, "the events, verified by client.Webhook", func() error {
		mu.Lock()
		defer mu.Unlock()
		have := slices.Sorted(slices.Values(got))
		if !slices.Equal(have, want) {
			return fmt.Errorf("got %v, want %v", have, want)
		}
		return nil
	})
}

// auditClientIP is the client_ip of phone's send row.
func auditClientIP(t *testing.T, db, phone string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var ip string
	if err := conn.QueryRow(ctx, `SELECT host(client_ip) FROM audit_log WHERE kind = 'send' AND phone_e164 = $1 ORDER BY id LIMIT 1`, phone).Scan(&ip); err != nil {
		t.Fatal(err)
	}
	return ip
}
