package otp

import lru "github.com/hashicorp/golang-lru/v2"

// phoneCache remembers ParsePhone's answers, valid or not, by the raw
// number and the region it was parsed in: libphonenumber's regexes are a
// request's largest cost, and the same strings come back (a send and its
// verify, resends, and above all floods of one hot number). It only
// stores: the flows parse on a miss. It is bounded (attackers choose the
// keys): hashicorp/golang-lru/v2's LRU, which BenchmarkPhoneCache measured
// as fast as the sharded map it replaced, from every core.
type phoneCache struct {
	m *lru.Cache[string, parsedPhone]
}

// phoneCacheEntries bounds the cache: 65,536 numbers, the hot ones.
const phoneCacheEntries = 1 << 16

// parsedPhone is one answer of ParsePhone.
type parsedPhone struct {
	phone Phone
	err   error
}

// newPhoneCache is a cache of at most entries answers (at least one).
func newPhoneCache(entries int) *phoneCache {
	m, err := lru.New[string, parsedPhone](max(entries, 1))
	if err != nil {
		panic(err) // only for a size below one
	}
	return &phoneCache{m: m}
}

func (c *phoneCache) get(raw, region string) (parsedPhone, bool) {
	return c.m.Get(phoneKey(raw, region))
}

func (c *phoneCache) put(raw, region string, p parsedPhone) {
	c.m.Add(phoneKey(raw, region), p)
}

func phoneKey(raw, region string) string { return region + "\x00" + raw }
