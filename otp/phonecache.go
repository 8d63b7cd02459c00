package otp

import (
	"hash/maphash"
	"sync"
)

// phoneCache remembers parse results, valid or not, because libphonenumber's
// regexes are the largest cost of a request and the same strings come back:
// a send and its verify, resends, and above all floods of one hot number. It
// is bounded (attackers choose the keys) and sharded (every request uses it).
type phoneCache struct {
	seed   maphash.Seed
	shards [16]phoneShard
	max    int // entries per shard
}

type phoneShard struct {
	mu sync.Mutex
	m  map[string]phoneResult
}

type phoneResult struct {
	phone Phone
	err   error
}

func newPhoneCache(entries int) *phoneCache {
	c := &phoneCache{seed: maphash.MakeSeed(), max: max(entries/16, 1)}
	for i := range c.shards {
		c.shards[i].m = make(map[string]phoneResult)
	}
	return c
}

func (c *phoneCache) parse(raw, region string) (Phone, error) {
	key := region + "\x00" + raw
	sh := &c.shards[maphash.String(c.seed, key)%16]
	sh.mu.Lock()
	r, ok := sh.m[key]
	sh.mu.Unlock()
	if ok {
		return r.phone, r.err
	}
	p, err := ParsePhone(raw, region)
	sh.mu.Lock()
	if len(sh.m) >= c.max {
		// Full: drop an arbitrary eighth. Map order is random enough that a
		// flood of junk cannot pin the useful entries.
		n := c.max / 8
		for k := range sh.m {
			if n <= 0 {
				break
			}
			delete(sh.m, k)
			n--
		}
	}
	sh.m[key] = phoneResult{p, err}
	sh.mu.Unlock()
	return p, err
}
