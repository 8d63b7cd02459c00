package phonecache

import (
	"strconv"
	"sync/atomic"
	"testing"

	lru "github.com/hashicorp/golang-lru/v2"

	"smsgw/internal/boundedmap"
	"smsgw/otp"
)

// store is what the benchmark compares: the cache's map, and a candidate.
type store interface {
	Get(k string) (otp.ParsedPhone, bool)
	Put(k string, p otp.ParsedPhone)
}

type bounded struct {
	m *boundedmap.Map[otp.ParsedPhone]
}

func (b bounded) Get(k string) (otp.ParsedPhone, bool) { return b.m.Get(k, nil) }
func (b bounded) Put(k string, p otp.ParsedPhone)      { b.m.Put(k, p, nil) }

type plainLRU struct {
	c *lru.Cache[string, otp.ParsedPhone]
}

func (l plainLRU) Get(k string) (otp.ParsedPhone, bool) { return l.c.Get(k) }
func (l plainLRU) Put(k string, p otp.ParsedPhone)      { l.c.Add(k, p) }

// BenchmarkPhoneCache compares the sharded bounded map with
// hashicorp/golang-lru/v2's plain LRU on a request's path, from every
// core at once: "hot" is a flood of one number (every Get a hit), "fresh"
// a flood of new numbers (a miss and a Put each, evicting at the bound).
func BenchmarkPhoneCache(b *testing.B) {
	const entries = 100_000
	impls := []struct {
		name string
		new  func() store
	}{
		{"boundedmap", func() store { return bounded{boundedmap.New[otp.ParsedPhone](entries, boundedmap.DropEighth)} }},
		{"golang-lru", func() store {
			c, err := lru.New[string, otp.ParsedPhone](entries)
			if err != nil {
				b.Fatal(err)
			}
			return plainLRU{c}
		}},
	}
	for _, shape := range []string{"hot", "fresh"} {
		for _, impl := range impls {
			b.Run(shape+"/"+impl.name, func(b *testing.B) {
				s := impl.new()
				s.Put(key("+14155552671", ""), otp.ParsedPhone{})
				var n atomic.Int64
				b.SetParallelism(8)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						k := key("+14155552671", "")
						if shape == "fresh" {
							k = key("+1415"+strconv.FormatInt(n.Add(1), 10), "")
						}
						if _, ok := s.Get(k); !ok {
							s.Put(k, otp.ParsedPhone{})
						}
					}
				})
			})
		}
	}
}
