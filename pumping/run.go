package pumping

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// refreshEvery reloads the overrides in case an announcement was lost.
const refreshEvery = 10 * time.Second

// Run keeps this replica in step with the others until ctx ends: it applies
// their announcements (lifted holds, changed overrides), and reloads the
// overrides on every (re)subscription, since messages sent while
// disconnected are lost, and every refresh period in case one was anyway.
func (g *Guard) Run(ctx context.Context) error {
	ps := g.rdb.Subscribe(ctx, g.channel())
	defer ps.Close()
	msgs := ps.ChannelWithSubscriptions()
	tick := time.NewTicker(refreshEvery)
	defer tick.Stop()
	subscribed := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			g.reloadOverrides(ctx)
		case m, ok := <-msgs:
			if !ok {
				return errors.New("pumping: subscription closed")
			}
			switch m := m.(type) {
			case *redis.Subscription:
				if m.Kind == "subscribe" {
					g.reloadOverrides(ctx)
					if subscribed {
						// Lifts announced while disconnected are lost.
						g.holds.clear()
					}
					subscribed = true
				}
			case *redis.Message:
				g.apply(ctx, m.Payload)
			}
		}
	}
}

// apply handles "lift <hold key>" and "overrides".
func (g *Guard) apply(ctx context.Context, payload string) {
	if key, ok := strings.CutPrefix(payload, "lift "); ok {
		g.holds.drop(key)
		return
	}
	if payload == "overrides" {
		g.reloadOverrides(ctx)
		return
	}
	g.log.WarnContext(ctx, "unknown message on the pumping channel", "channel", g.channel(), "payload", payload)
}

func (g *Guard) reloadOverrides(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := g.overrides.reload(rctx); err != nil && ctx.Err() == nil {
		g.log.ErrorContext(ctx, "reloading the pumping overrides failed", "err", err)
	}
}
