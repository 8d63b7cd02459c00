package ratelimit

import (
	"context"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/otp"
)

// refusals remembers, per subject, that Redis refused it until a moment T.
// The sliding log only relaxes with time, so until T the answer can only be
// "refused" again: a flood on one hot phone or IP is answered from memory,
// and nothing is ever admitted that Redis would refuse. Only a refund or an
// admin reset gives quota back early; both are published on Redis pub/sub and
// every replica forgets what they touched. The cache is used only while this
// replica is subscribed, so it cannot miss such a message unknowingly.
//
// It is bounded (attackers choose the subjects) and sharded (every request
// looks in it). A full shard forgets its oldest entry: O(1), no scan.
type refusals struct {
	subscribed atomic.Bool
	seed       maphash.Seed
	shards     [16]refusalShard
}

type refusal struct {
	until  time.Time // local clock; never later than Redis's T
	window otp.Window
}

// refusalShard keeps its keys in insertion order in a ring; an entry
// remembers its ring slot's sequence number, so a slot left behind by a
// forgotten and re-added key evicts nothing when its turn comes.
type refusalShard struct {
	mu   sync.Mutex
	m    map[string]refusalEntry
	ring []ringSlot
	head int    // oldest slot
	n    int    // slots in use
	seq  uint64 // last sequence number given
}

type refusalEntry struct {
	refusal
	seq uint64
}

type ringSlot struct {
	key string
	seq uint64
}

func newRefusals(max int) *refusals {
	r := &refusals{seed: maphash.MakeSeed()}
	// The shards share max exactly; a shard with no room remembers nothing.
	for i := range r.shards {
		per := max / len(r.shards)
		if i < max%len(r.shards) {
			per++
		}
		r.shards[i].m = make(map[string]refusalEntry, per)
		r.shards[i].ring = make([]ringSlot, per)
	}
	return r
}

func (r *refusals) shard(key string) *refusalShard {
	return &r.shards[maphash.String(r.seed, key)%uint64(len(r.shards))]
}

// lookup finds a standing refusal of any of keys.
func (r *refusals) lookup(keys []string, now time.Time) (refusal, bool) {
	if !r.subscribed.Load() {
		return refusal{}, false
	}
	for _, k := range keys {
		sh := r.shard(k)
		sh.mu.Lock()
		f, ok := sh.m[k]
		sh.mu.Unlock()
		if ok && now.Before(f.until) {
			return f.refusal, true
		}
	}
	return refusal{}, false
}

// remember records a refusal, evicting the shard's oldest entry when full.
func (r *refusals) remember(key string, f refusal) {
	sh := r.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e, ok := sh.m[key]; ok {
		e.refusal = f
		sh.m[key] = e
		return
	}
	if len(sh.ring) == 0 {
		return
	}
	if sh.n == len(sh.ring) {
		old := sh.ring[sh.head]
		if e, ok := sh.m[old.key]; ok && e.seq == old.seq {
			delete(sh.m, old.key)
		}
		sh.head = (sh.head + 1) % len(sh.ring)
		sh.n--
	}
	sh.seq++
	sh.ring[(sh.head+sh.n)%len(sh.ring)] = ringSlot{key: key, seq: sh.seq}
	sh.n++
	sh.m[key] = refusalEntry{refusal: f, seq: sh.seq}
}

func (r *refusals) forget(keys []string) {
	for _, k := range keys {
		sh := r.shard(k)
		sh.mu.Lock()
		delete(sh.m, k)
		sh.mu.Unlock()
	}
}

func (r *refusals) clear() {
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		clear(sh.m)
		clear(sh.ring)
		sh.head, sh.n = 0, 0
		sh.mu.Unlock()
	}
}

// len counts the entries held, expired ones included.
func (r *refusals) len() int {
	n := 0
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

func (l *Limiter) channel() string { return l.prefix + "rl:invalidate" }

// publish tells every replica (this one included) that keys got quota back.
// On Cluster the message is sharded pub/sub (SPUBLISH): it goes to the one
// shard that owns the channel, where every replica listens.
func (l *Limiter) publish(ctx context.Context, keys []string) error {
	if l.refusals == nil {
		return nil
	}
	l.refusals.forget(keys)
	msg := strings.Join(keys, "\n")
	if l.cluster {
		return l.rdb.SPublish(ctx, l.channel(), msg).Err()
	}
	return l.rdb.Publish(ctx, l.channel(), msg).Err()
}

// Run keeps the local refusal cache in step with the other replicas until ctx
// ends: it listens for refunds and resets, and drops the whole cache whenever
// the subscription is (re)established, since messages may have been missed
// while it was down (a failover, a restart, the channel's shard moving).
// Without Run the cache stays unused.
func (l *Limiter) Run(ctx context.Context) error {
	if l.refusals == nil {
		<-ctx.Done()
		return nil
	}
	var sub *redis.PubSub
	if l.cluster {
		sub = l.rdb.SSubscribe(ctx, l.channel())
	} else {
		sub = l.rdb.Subscribe(ctx, l.channel())
	}
	defer sub.Close()
	defer l.refusals.subscribed.Store(false)
	ch := sub.ChannelWithSubscriptions(redis.WithChannelHealthCheckInterval(5 * time.Second))
	for {
		select {
		case <-ctx.Done():
			return nil
		case msg, ok := <-ch:
			if !ok {
				return nil
			}
			switch m := msg.(type) {
			case *redis.Subscription:
				switch m.Kind {
				case "subscribe", "ssubscribe":
					l.refusals.clear()
					l.refusals.subscribed.Store(true)
				default:
					l.refusals.subscribed.Store(false)
				}
			case *redis.Message:
				l.refusals.forget(strings.Split(m.Payload, "\n"))
			}
		}
	}
}
