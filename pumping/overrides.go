package pumping

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/otp"
)

// maxOverrides bounds what operators may keep; each is a map entry in every
// replica's memory.
const maxOverrides = 100_000

// overrideStore keeps the operators' overrides in one Redis hash (target →
// JSON), and in every replica's memory, reloaded when any replica announces
// a change and every refresh period in case an announcement was lost.
type overrideStore struct {
	rdb  redis.UniversalClient
	key  string
	now  func() time.Time
	byID atomic.Pointer[map[string]otp.Override]
}

func newOverrideStore(rdb redis.UniversalClient, key string, now func() time.Time) *overrideStore {
	s := &overrideStore{rdb: rdb, key: key, now: now}
	s.byID.Store(&map[string]otp.Override{})
	return s
}

// lookup finds the longest live target that prefixes e164.
func (s *overrideStore) lookup(e164 string) (otp.Override, bool) {
	m := *s.byID.Load()
	if len(m) == 0 {
		return otp.Override{}, false
	}
	now := s.now()
	for n := len(e164); n >= 2; n-- {
		if o, ok := m[e164[:n]]; ok && now.Before(o.ExpiresAt) {
			return o, true
		}
	}
	return otp.Override{}, false
}

func (s *overrideStore) reload(ctx context.Context) error {
	all, err := s.rdb.HGetAll(ctx, s.key).Result()
	if err != nil {
		return err
	}
	m := make(map[string]otp.Override, len(all))
	for target, v := range all {
		var o otp.Override
		if json.Unmarshal([]byte(v), &o) == nil {
			m[target] = o
		}
	}
	s.byID.Store(&m)
	return nil
}

// ValidTarget checks an override's target: "+" and 2 to 15 digits.
func ValidTarget(t string) bool {
	if len(t) < 3 || len(t) > 16 || t[0] != '+' || t[1] == '0' {
		return false
	}
	return strings.Trim(t[1:], "0123456789") == ""
}

// Lookup answers from memory.
func (g *Guard) Lookup(e164 string) (otp.Override, bool) { return g.overrides.lookup(e164) }

// ListOverrides reads the live overrides, by target.
func (g *Guard) ListOverrides(ctx context.Context) ([]otp.Override, error) {
	if err := g.overrides.reload(ctx); err != nil {
		return nil, fmt.Errorf("pumping: overrides: %w", err)
	}
	now := g.nowCtx(ctx)
	var out []otp.Override
	for _, o := range *g.overrides.byID.Load() {
		if now.Before(o.ExpiresAt) {
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Target < out[j].Target })
	return out, nil
}

// SetOverride stores an override (replacing one for the same target) and
// tells every replica. Expired ones are pruned as it goes.
func (g *Guard) SetOverride(ctx context.Context, o otp.Override) error {
	if !ValidTarget(o.Target) {
		return otp.Errorf(otp.EInvalidRequest, "target must be an E.164 number or prefix such as \"+4479111\"")
	}
	if o.Action != otp.OverrideAllow && o.Action != otp.OverrideBlock {
		return otp.Errorf(otp.EInvalidRequest, "action must be \"allow\" or \"block\"")
	}
	if !o.ExpiresAt.After(g.nowCtx(ctx)) {
		return otp.Errorf(otp.EInvalidRequest, "the override must expire in the future")
	}
	if len(o.Note) > 500 {
		return otp.Errorf(otp.EInvalidRequest, "note is longer than 500 bytes")
	}
	if err := g.overrides.reload(ctx); err != nil {
		return fmt.Errorf("pumping: overrides: %w", err)
	}
	now := g.nowCtx(ctx)
	var expired []string
	for t, old := range *g.overrides.byID.Load() {
		if !now.Before(old.ExpiresAt) {
			expired = append(expired, t)
		}
	}
	if len(*g.overrides.byID.Load())-len(expired) >= maxOverrides {
		return otp.Errorf(otp.EInvalidRequest, "there are already %d overrides; delete some first", maxOverrides)
	}
	b, _ := json.Marshal(o)
	p := g.rdb.TxPipeline()
	p.HSet(ctx, g.overrides.key, o.Target, b)
	if len(expired) > 0 {
		p.HDel(ctx, g.overrides.key, expired...)
	}
	if _, err := p.Exec(ctx); err != nil {
		return fmt.Errorf("pumping: overrides: %w", err)
	}
	return g.overridesChanged(ctx)
}

// DeleteOverride removes the override for target.
func (g *Guard) DeleteOverride(ctx context.Context, target string) error {
	n, err := g.rdb.HDel(ctx, g.overrides.key, target).Result()
	if err != nil {
		return fmt.Errorf("pumping: overrides: %w", err)
	}
	if n == 0 {
		return otp.Errorf(otp.ENotFound, "no override for %s", target)
	}
	return g.overridesChanged(ctx)
}

func (g *Guard) overridesChanged(ctx context.Context) error {
	if err := g.overrides.reload(ctx); err != nil {
		return fmt.Errorf("pumping: overrides: %w", err)
	}
	if err := g.rdb.Publish(ctx, g.channel(), "overrides").Err(); err != nil {
		return fmt.Errorf("pumping: overrides: announcing the change: %w", err)
	}
	return nil
}
