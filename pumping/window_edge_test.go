package pumping

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// countryKey is the hash of p's country.
func countryKey(t *testing.T, g *Guard, raw string) string {
	t.Helper()
	for _, s := range g.destination(phone(t, raw)).subjects {
		if s.rule == RuleCountry {
			return s.key
		}
	}
	t.Fatalf("%s: no country subject", raw)
	return ""
}

// A send refused by its solved challenges' ledger counts the refusal in
// the country's own hash: when that hash held nothing before, it must
// still expire.
func TestRefusalOnNewKeyExpires(t *testing.T) {
	f := newFixture(t)
	g := f.guard(t, func(c *Config) {
		only(RuleCountry)(c)
		c.Floors[RuleCountry] = 2
		c.ChallengeBudget = true
	}, false)
	ctx := context.Background()
	var refused bool
	for i := range 3 {
		r, err := g.Reserve(ctx, phone(t, fmt.Sprintf("+3712%07d", i*100_000)), ip("198.18.0.1"), true)
		if err != nil {
			t.Fatal(err)
		}
		refused = r.Refused != nil
	}
	if !refused {
		t.Fatal("a third solved challenge nobody verified was let through a budget of 2")
	}
	key := countryKey(t, g, "+37120000000")
	if n, _ := f.rdb.HGet(ctx, key, fieldRefused).Int(); n != 1 {
		t.Fatalf("refusals counted %d, want 1", n)
	}
	if ttl := f.rdb.PTTL(ctx, key).Val(); ttl <= 0 {
		t.Fatalf("the country's hash, made by the refusal, has PTTL %s: it never expires", ttl)
	}
}

// An approval counted after a subject's last send, in a later bucket, is
// still inside the window when the next send comes a whole window after
// that send: the window moves past every bucket the send saw, not past
// the approval's.
func TestApprovalOutlivesTheSendsWindow(t *testing.T) {
	f := newFixture(t)
	g := f.guard(t, only(RuleCountry), false)
	ctx := context.Background()
	f.clock.Set(time.Date(2026, 3, 2, 10, 55, 0, 0, time.UTC))
	first := phone(t, "+37120000000")
	reserve(t, g, first, ip("198.18.0.1"))
	f.advance(10 * time.Minute) // 11:05, the next bucket
	if err := g.Approved(ctx, first); err != nil {
		t.Fatal(err)
	}
	f.clock.Set(time.Date(2026, 3, 3, 10, 30, 0, 0, time.UTC)) // the window: 11:00 on the 2nd to now
	reserve(t, g, phone(t, "+37129900000"), ip("198.18.0.2"))
	h := f.rdb.HGetAll(ctx, countryKey(t, g, "+37120000000")).Val()
	if h[fieldApproved] != "1" || h[fieldTexts] != "1" {
		t.Fatalf("country S=%q A=%q, want 1 text (the new one) and 1 approval (11:05 yesterday, inside the window): %v",
			h[fieldTexts], h[fieldApproved], h)
	}
}
