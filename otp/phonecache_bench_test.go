package otp

import (
	"strconv"
	"sync/atomic"
	"testing"
)

// BenchmarkPhoneCache is the parsed-number cache on a request's path, from
// every core at once: "hot" is a flood of one number (every get a hit),
// "fresh" a flood of new numbers (a miss and a put each, evicting at the
// bound). At c9231e3 it chose hashicorp/golang-lru's LRU over a sharded
// map of our own, since removed (as fast, figures in that commit's
// message); a candidate to compare goes next to the cache here.
func BenchmarkPhoneCache(b *testing.B) {
	for _, shape := range []string{"hot", "fresh"} {
		b.Run(shape+"/golang-lru", func(b *testing.B) {
			c := newPhoneCache(100_000)
			c.put("+14155552671", "", parsedPhone{})
			var n atomic.Int64
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					raw := "+14155552671"
					if shape == "fresh" {
						raw = "+1415" + strconv.FormatInt(n.Add(1), 10)
					}
					if _, ok := c.get(raw, ""); !ok {
						c.put(raw, "", parsedPhone{})
					}
				}
			})
		})
	}
}
