package pumping

import (
	"time"

	"smsgw/internal/boundedmap"
	"smsgw/otp"
)

// holdCache remembers, per replica, the subjects a rule refused and until
// when, so a flood on a held range or network is answered from memory. It
// is bounded (attackers choose the subjects) and sharded (every send asks
// it); an entry lives at most HoldFor, so an approval or a lift elsewhere is
// seen within that time even if its message is lost.
type holdCache struct {
	m *boundedmap.Map[heldSubject]
}

type heldSubject struct {
	refusal otp.PumpingRefusal
	until   time.Time // when this replica asks Redis again
	retryAt time.Time // when the rule itself gives room back
}

func newHoldCache(entries int) *holdCache {
	return &holdCache{m: boundedmap.New[heldSubject](entries, boundedmap.DropOne)}
}

// holdKey names a held subject by its rule family and id: every subject of
// a send has its own, and both budgets of the spend ledger share one.
func holdKey(family, id string) string { return family + "\x00" + id }

func (c *holdCache) empty() bool { return c.m.Empty() }

// get returns a live hold, its RetryAfter counted from now.
func (c *holdCache) get(key string, now time.Time) (otp.PumpingRefusal, bool) {
	h, ok := c.m.Get(key, func(h heldSubject) bool { return now.Before(h.until) })
	if !ok {
		return otp.PumpingRefusal{}, false
	}
	r := h.refusal
	r.RetryAfter = max(h.retryAt.Sub(now), time.Second)
	return r, true
}

// put remembers a refusal for at most hold. A full shard first drops what
// expired, then, if still full, one arbitrary entry: O(1) per insert at
// worst, and a forgotten hold only costs one Redis call to learn again.
func (c *holdCache) put(key string, r otp.PumpingRefusal, now time.Time, hold time.Duration) {
	if hold <= 0 {
		return
	}
	c.m.Put(key, heldSubject{refusal: r, until: now.Add(min(hold, r.RetryAfter)), retryAt: now.Add(r.RetryAfter)},
		func(h heldSubject) bool { return !now.Before(h.until) })
}

// drop forgets a hold (a lift, an approval announced by another replica).
func (c *holdCache) drop(key string) { c.m.Drop(key) }

// clear forgets every hold.
func (c *holdCache) clear() { c.m.Clear() }
