package ratelimit

import (
	"context"
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
type refusals struct {
	max        int
	subscribed atomic.Bool

	mu sync.RWMutex
	m  map[string]refusal // by subject key
}

type refusal struct {
	until  time.Time // local clock; never later than Redis's T
	window otp.Window
}

func newRefusals(max int) *refusals {
	return &refusals{max: max, m: make(map[string]refusal)}
}

// lookup finds a standing refusal of any of keys.
func (r *refusals) lookup(keys []string, now time.Time) (refusal, bool) {
	if !r.subscribed.Load() {
		return refusal{}, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, k := range keys {
		if f, ok := r.m[k]; ok && now.Before(f.until) {
			return f, true
		}
	}
	return refusal{}, false
}

// remember records a refusal. When the cache is full of standing refusals
// it records nothing: the next request asks Redis, which stays exact.
func (r *refusals) remember(key string, f refusal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.m) >= r.max {
		now := time.Now()
		for k, old := range r.m {
			if !now.Before(old.until) {
				delete(r.m, k)
			}
		}
		if len(r.m) >= r.max {
			return
		}
	}
	r.m[key] = f
}

func (r *refusals) forget(keys []string) {
	r.mu.Lock()
	for _, k := range keys {
		delete(r.m, k)
	}
	r.mu.Unlock()
}

func (r *refusals) clear() {
	r.mu.Lock()
	clear(r.m)
	r.mu.Unlock()
}

func (l *Limiter) channel() string { return l.prefix + "rl:invalidate" }

// publish tells every replica (this one included) that keys got quota back.
func (l *Limiter) publish(ctx context.Context, keys []string) error {
	if l.refusals == nil {
		return nil
	}
	l.refusals.forget(keys)
	return l.rdb.Publish(ctx, l.channel(), strings.Join(keys, "\n")).Err()
}

// Run keeps the local refusal cache in step with the other replicas until ctx
// ends: it listens for refunds and resets, and drops the whole cache whenever
// the subscription is (re)established, since messages may have been missed
// while it was down. Without Run the cache stays unused.
func (l *Limiter) Run(ctx context.Context, rdb *redis.Client) error {
	if l.refusals == nil {
		<-ctx.Done()
		return nil
	}
	sub := rdb.Subscribe(ctx, l.channel())
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
				if m.Kind == "subscribe" {
					l.refusals.clear()
					l.refusals.subscribed.Store(true)
				}
			case *redis.Message:
				l.refusals.forget(strings.Split(m.Payload, "\n"))
			}
		}
	}
}
