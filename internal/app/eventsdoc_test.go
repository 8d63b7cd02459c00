package app

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestEventsDocConfig loads docs/events.md's configuration block, as
// printed: with its secret's variable set it is the config the page says;
// without it, start-up stops naming the key.
func TestEventsDocConfig(t *testing.T) {
	b, err := os.ReadFile("../../docs/events.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "TestEventsDocConfig")
	_, rest, ok2 := strings.Cut(rest, "```toml\n")
	block, _, ok3 := strings.Cut(rest, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/events.md has no toml block after the line naming TestEventsDocConfig")
	}
	path := writeConfig(t, block)
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	cfg, err := LoadConfig(path, func(k string) string {
		if k == "SMSGW_WEBHOOK_SECRET" {
			return secret
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	e := cfg.Events
	if len(e.Webhooks) != 1 || e.Webhooks[0].URL != "https://signup-backend.internal/smsgw/events" || e.Webhooks[0].Secret != secret ||
		e.RetryFor.Duration != 24*time.Hour || e.Retention.Duration != 72*time.Hour {
		t.Fatalf("events config %+v", e)
	}
	if _, err := LoadConfig(path, noEnv); err == nil || !strings.Contains(err.Error(), "events.webhooks[0].secret_env") {
		t.Fatalf("without the secret: got %v, want an error naming events.webhooks[0].secret_env", err)
	}
}
