// Package phonecache remembers parse results of phone numbers, valid or
// not, because libphonenumber's regexes are the largest cost of a request
// and the same strings come back: a send and its verify, resends, and above
// all floods of one hot number.
package phonecache

import (
	lru "github.com/hashicorp/golang-lru/v2"

	"smsgw/otp"
)

// Cache is an otp.PhoneCache: it only stores (the flows parse on a miss).
// It is bounded (attackers choose the keys): hashicorp/golang-lru/v2's LRU,
// which BenchmarkPhoneCache measured as fast as the sharded map it replaced
// (internal/boundedmap), from every core, on a hot number and on a flood of
// new ones.
type Cache struct {
	m *lru.Cache[string, otp.ParsedPhone]
}

var _ otp.PhoneCache = (*Cache)(nil)

// New is a cache of at most entries answers (at least one).
func New(entries int) *Cache {
	m, err := lru.New[string, otp.ParsedPhone](max(entries, 1))
	if err != nil {
		panic(err) // only for a size below one
	}
	return &Cache{m: m}
}

// Get is the answer remembered for raw parsed in region.
func (c *Cache) Get(raw, region string) (otp.ParsedPhone, bool) {
	return c.m.Get(key(raw, region))
}

// Put remembers p as the answer for raw parsed in region.
func (c *Cache) Put(raw, region string, p otp.ParsedPhone) {
	c.m.Add(key(raw, region), p)
}

func key(raw, region string) string { return region + "\x00" + raw }
