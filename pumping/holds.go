package pumping

import (
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"smsgw/otp"
)

// holdCache remembers, per replica, the subjects a rule refused and until
// when, so a flood on a held range or network is answered from memory. It
// is bounded (attackers choose the subjects): hashicorp/golang-lru/v2's
// LRU, so a full cache forgets the hold asked least recently, and a
// forgotten hold costs one Redis call to learn again. An entry answers for
// at most HoldFor, so an approval or a lift elsewhere is seen within that
// time even if its message is lost.
type holdCache struct {
	m *lru.Cache[string, heldSubject]
}

type heldSubject struct {
	refusal otp.PumpingRefusal
	until   time.Time // when this replica asks Redis again
	retryAt time.Time // when the rule itself gives room back
}

// newHoldCache is a cache of at most entries holds (at least one).
func newHoldCache(entries int) *holdCache {
	m, err := lru.New[string, heldSubject](max(entries, 1))
	if err != nil {
		panic(err) // only for a size below one
	}
	return &holdCache{m: m}
}

// holdKey names a held subject by its rule family and id: every subject of
// a send has its own, and both budgets of the spend ledger share one.
func holdKey(family, id string) string { return family + "\x00" + id }

func (c *holdCache) empty() bool { return c.m.Len() == 0 }

// get returns a live hold, its RetryAfter counted from now; a lapsed one is
// forgotten.
func (c *holdCache) get(key string, now time.Time) (otp.PumpingRefusal, bool) {
	h, ok := c.m.Get(key)
	if !ok {
		return otp.PumpingRefusal{}, false
	}
	if !now.Before(h.until) {
		c.m.Remove(key)
		return otp.PumpingRefusal{}, false
	}
	r := h.refusal
	r.RetryAfter = max(h.retryAt.Sub(now), time.Second)
	return r, true
}

// put remembers a refusal for at most hold.
func (c *holdCache) put(key string, r otp.PumpingRefusal, now time.Time, hold time.Duration) {
	if hold <= 0 {
		return
	}
	c.m.Add(key, heldSubject{refusal: r, until: now.Add(min(hold, r.RetryAfter)), retryAt: now.Add(r.RetryAfter)})
}

// drop forgets a hold (a lift, an approval announced by another replica).
func (c *holdCache) drop(key string) { c.m.Remove(key) }

// clear forgets every hold.
func (c *holdCache) clear() { c.m.Purge() }
