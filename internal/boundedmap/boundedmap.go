// Package boundedmap is a concurrent map of bounded size for the per-replica
// caches on the request path (parsed phones, pumping holds):
// sharded so that every request can use it, bounded because attackers
// choose the keys.
package boundedmap

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// shards is how many locks the map is split under.
const shards = 16

// Eviction is what Put drops from a full shard once no stale entry is left.
type Eviction int

const (
	// DropOne drops one arbitrary entry: O(1) per insert.
	DropOne Eviction = iota
	// DropEighth drops an arbitrary eighth of the shard, so that a flood of
	// junk keys pays for eviction once per eighth. Map order is random
	// enough that a flood cannot pin the useful entries.
	DropEighth
)

// Map maps strings to V, holding about entries at most.
type Map[V any] struct {
	n      atomic.Int64 // entries, so the common case (none) costs one load
	seed   maphash.Seed
	shards [shards]shard[V]
	max    int // entries per shard
	evict  Eviction
}

type shard[V any] struct {
	mu sync.Mutex
	m  map[string]V
}

// New is an empty map of about entries entries at most.
func New[V any](entries int, evict Eviction) *Map[V] {
	c := &Map[V]{seed: maphash.MakeSeed(), max: max(entries/shards, 1), evict: evict}
	for i := range c.shards {
		c.shards[i].m = make(map[string]V)
	}
	return c
}

func (c *Map[V]) shard(key string) *shard[V] {
	return &c.shards[maphash.String(c.seed, key)%shards]
}

// Empty says whether the map holds nothing, without a lock.
func (c *Map[V]) Empty() bool { return c.n.Load() == 0 }

// Len is how many entries the map holds, dead ones included.
func (c *Map[V]) Len() int { return int(c.n.Load()) }

// Get returns the entry under key. An entry live (when not nil) says is
// dead is dropped and not returned.
func (c *Map[V]) Get(key string, live func(V) bool) (V, bool) {
	sh := c.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	v, ok := sh.m[key]
	if ok && live != nil && !live(v) {
		delete(sh.m, key)
		c.n.Add(-1)
		var zero V
		return zero, false
	}
	return v, ok
}

// Put sets key to v. A new key in a full shard first drops up to 8 entries
// stale (when not nil) says are dead, then, if the shard is still full,
// what the map's Eviction says.
func (c *Map[V]) Put(key string, v V, stale func(V) bool) {
	sh := c.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.m[key]; !ok && len(sh.m) >= c.max {
		if stale != nil {
			dropped := 0
			for k, old := range sh.m {
				if stale(old) {
					delete(sh.m, k)
					c.n.Add(-1)
					dropped++
				}
				if dropped >= 8 {
					break
				}
			}
		}
		if len(sh.m) >= c.max {
			n := 1
			if c.evict == DropEighth {
				n = max(c.max/8, 1)
			}
			for k := range sh.m {
				if n <= 0 {
					break
				}
				delete(sh.m, k)
				c.n.Add(-1)
				n--
			}
		}
	}
	if _, ok := sh.m[key]; !ok {
		c.n.Add(1)
	}
	sh.m[key] = v
}

// Drop forgets key.
func (c *Map[V]) Drop(key string) {
	sh := c.shard(key)
	sh.mu.Lock()
	if _, ok := sh.m[key]; ok {
		delete(sh.m, key)
		c.n.Add(-1)
	}
	sh.mu.Unlock()
}

// Clear forgets every entry.
func (c *Map[V]) Clear() {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		c.n.Add(-int64(len(sh.m)))
		clear(sh.m)
		sh.mu.Unlock()
	}
}
