package boundedmap

import (
	"fmt"
	"sync"
	"testing"
)

func (c *Map[V]) size() int {
	n := 0
	for i := range c.shards {
		c.shards[i].mu.Lock()
		n += len(c.shards[i].m)
		c.shards[i].mu.Unlock()
	}
	return n
}

// A flood of distinct keys never holds more than the bound, whichever the
// eviction, and the lock-free count agrees with the shards.
func TestBound(t *testing.T) {
	for _, tt := range []struct {
		name  string
		evict Eviction
	}{{"drop one", DropOne}, {"drop an eighth", DropEighth}} {
		t.Run(tt.name, func(t *testing.T) {
			c := New[int](1600, tt.evict)
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					for i := range 2000 {
						c.Put(fmt.Sprintf("%d-%d", g, i), i, nil)
					}
				})
			}
			wg.Wait()
			if n := c.size(); n > 1600 || int64(n) != c.n.Load() {
				t.Fatalf("%d entries, count %d; want at most 1600 and equal", n, c.n.Load())
			}
		})
	}
}

// A full shard drops a stale entry before any live one.
func TestStaleGoesFirst(t *testing.T) {
	c := New[int](4*shards, DropOne) // four entries per shard
	var same []string                // keys in the shard of "b"
	for i := 0; len(same) < 4; i++ {
		if k := fmt.Sprint("k", i); c.shard(k) == c.shard("b") {
			same = append(same, k)
		}
	}
	c.Put(same[0], -1, nil) // stale
	for _, k := range same[1:] {
		c.Put(k, 1, nil)
	}
	c.Put("b", 2, func(v int) bool { return v < 0 })
	if _, ok := c.Get(same[0], nil); ok {
		t.Fatal("the stale entry was kept")
	}
	for _, k := range append(same[1:], "b") {
		if _, ok := c.Get(k, nil); !ok {
			t.Fatalf("live %s dropped", k)
		}
	}
}

func TestGetDropsDead(t *testing.T) {
	c := New[int](100, DropOne)
	c.Put("a", 1, nil)
	if _, ok := c.Get("a", func(v int) bool { return v > 1 }); ok {
		t.Fatal("a dead entry was returned")
	}
	if _, ok := c.Get("a", nil); ok || !c.Empty() {
		t.Fatal("a dead entry was kept")
	}
	c.Put("a", 1, nil)
	c.Put("b", 2, nil)
	c.Drop("a")
	if _, ok := c.Get("a", nil); ok {
		t.Fatal("dropped entry kept")
	}
	c.Clear()
	if !c.Empty() || c.size() != 0 {
		t.Fatal("Clear left entries")
	}
}
