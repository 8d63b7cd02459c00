package pumping

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"smsgw/otp"
)

// holdCache remembers, per replica, the subjects a rule refused and until
// when, so a flood on a held range or network is answered from memory. It
// is bounded (attackers choose the subjects) and sharded (every send asks
// it); an entry lives at most HoldFor, so an approval or a lift elsewhere is
// seen within that time even if its message is lost.
type holdCache struct {
	n      atomic.Int64 // entries, so the common case (none) costs one load
	seed   maphash.Seed
	shards [16]holdShard
	max    int
}

type holdShard struct {
	mu sync.Mutex
	m  map[string]heldSubject
}

type heldSubject struct {
	refusal otp.PumpingRefusal
	until   time.Time // when this replica asks Redis again
	retryAt time.Time // when the rule itself gives room back
}

func newHoldCache(entries int) *holdCache {
	c := &holdCache{seed: maphash.MakeSeed(), max: max(entries/16, 1)}
	for i := range c.shards {
		c.shards[i].m = make(map[string]heldSubject)
	}
	return c
}

// holdKey names a held subject by its rule family and id: every subject of
// a send has its own, and both budgets of the spend ledger share one.
func holdKey(family, id string) string { return family + "\x00" + id }

func (c *holdCache) empty() bool { return c.n.Load() == 0 }

func (c *holdCache) shard(key string) *holdShard {
	return &c.shards[maphash.String(c.seed, key)%uint64(len(c.shards))]
}

// get returns a live hold, its RetryAfter counted from now.
func (c *holdCache) get(key string, now time.Time) (otp.PumpingRefusal, bool) {
	sh := c.shard(key)
	sh.mu.Lock()
	h, ok := sh.m[key]
	if ok && !now.Before(h.until) {
		delete(sh.m, key)
		c.n.Add(-1)
		ok = false
	}
	sh.mu.Unlock()
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
	until := now.Add(min(hold, r.RetryAfter))
	sh := c.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.m[key]; !ok && len(sh.m) >= c.max {
		dropped := 0
		for k, v := range sh.m {
			if !now.Before(v.until) {
				delete(sh.m, k)
				c.n.Add(-1)
				dropped++
			}
			if dropped >= 8 {
				break
			}
		}
		if len(sh.m) >= c.max {
			for k := range sh.m {
				delete(sh.m, k)
				c.n.Add(-1)
				break
			}
		}
	}
	if _, ok := sh.m[key]; !ok {
		c.n.Add(1)
	}
	sh.m[key] = heldSubject{refusal: r, until: until, retryAt: now.Add(r.RetryAfter)}
}

// drop forgets a hold (a lift, an approval announced by another replica).
func (c *holdCache) drop(key string) {
	sh := c.shard(key)
	sh.mu.Lock()
	if _, ok := sh.m[key]; ok {
		delete(sh.m, key)
		c.n.Add(-1)
	}
	sh.mu.Unlock()
}

// clear forgets every hold.
func (c *holdCache) clear() {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		c.n.Add(-int64(len(sh.m)))
		clear(sh.m)
		sh.mu.Unlock()
	}
}
