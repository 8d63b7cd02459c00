package ratelimit

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
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
// It is bounded (attackers choose the subjects): a full cache forgets the
// entry least recently used, so a flood's subject stays while an attacker's
// fresh subjects come and go. hashicorp/golang-lru's LRU was no slower than
// the sharded map it replaced on this path, where its expirable LRU and
// otter were (docs/measurements/2026-11-26-refusal-cache.md).
type refusals struct {
	subscribed atomic.Bool
	m          *lru.Cache[string, refusal]
}

type refusal struct {
	until  time.Time // local clock; never later than Redis's T
	window otp.Window
}

func newRefusals(max int) *refusals {
	m, err := lru.New[string, refusal](max)
	if err != nil { // max < 1: the limiter makes no cache then
		panic(err)
	}
	return &refusals{m: m}
}

// lookup finds a standing refusal of any of keys.
func (r *refusals) lookup(keys []string, now time.Time) (refusal, bool) {
	if !r.subscribed.Load() {
		return refusal{}, false
	}
	for _, k := range keys {
		if f, ok := r.m.Get(k); ok && now.Before(f.until) {
			return f, true
		}
	}
	return refusal{}, false
}

// remember records a refusal, evicting the least recently used when full.
// remember copies key: a send's keys are slices of one longer string
// (keysWithPending), which a remembered refusal would otherwise keep alive for
// as long as it is held, 100,000 of them under a flood.
func (r *refusals) remember(key string, f refusal) { r.m.Add(strings.Clone(key), f) }

func (r *refusals) forget(keys []string) {
	for _, k := range keys {
		r.m.Remove(k)
	}
}

func (r *refusals) clear() { r.m.Purge() }

// len counts the entries held, expired ones included.
func (r *refusals) len() int { return r.m.Len() }

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
