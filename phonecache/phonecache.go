// Package phonecache remembers parse results of phone numbers, valid or
// not, because libphonenumber's regexes are the largest cost of a request
// and the same strings come back: a send and its verify, resends, and above
// all floods of one hot number.
package phonecache

import (
	"smsgw/internal/boundedmap"
	"smsgw/otp"
)

// Cache is an otp.PhoneParser. It is bounded (attackers choose the keys)
// and sharded (every request uses it).
type Cache struct {
	m *boundedmap.Map[result]
}

type result struct {
	phone otp.Phone
	err   error
}

// New is a cache of about entries answers.
func New(entries int) *Cache {
	return &Cache{m: boundedmap.New[result](entries, boundedmap.DropEighth)}
}

// Parse is otp.ParsePhone, remembered.
func (c *Cache) Parse(raw, region string) (otp.Phone, error) {
	key := region + "\x00" + raw
	if r, ok := c.m.Get(key, nil); ok {
		return r.phone, r.err
	}
	p, err := otp.ParsePhone(raw, region)
	c.m.Put(key, result{p, err}, nil)
	return p, err
}
