// Package phonecache remembers parse results of phone numbers, valid or
// not, because libphonenumber's regexes are the largest cost of a request
// and the same strings come back: a send and its verify, resends, and above
// all floods of one hot number.
package phonecache

import (
	"smsgw/internal/boundedmap"
	"smsgw/otp"
)

// Cache is an otp.PhoneCache: it only stores (the flows parse on a miss).
// It is bounded (attackers choose the keys) and sharded (every request uses
// it).
type Cache struct {
	m *boundedmap.Map[otp.ParsedPhone]
}

var _ otp.PhoneCache = (*Cache)(nil)

// New is a cache of about entries answers.
func New(entries int) *Cache {
	return &Cache{m: boundedmap.New[otp.ParsedPhone](entries, boundedmap.DropEighth)}
}

// Get is the answer remembered for raw parsed in region.
func (c *Cache) Get(raw, region string) (otp.ParsedPhone, bool) {
	return c.m.Get(key(raw, region), nil)
}

// Put remembers p as the answer for raw parsed in region.
func (c *Cache) Put(raw, region string, p otp.ParsedPhone) {
	c.m.Put(key(raw, region), p, nil)
}

func key(raw, region string) string { return region + "\x00" + raw }
