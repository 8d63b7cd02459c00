package ratelimit

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/otp"
)

// Reserve decides the subjects as Allow does, but holds an admission only
// as a reservation (counted at once, gone after the lease unless
// committed): a caller deciding one request over several stores (the
// regions of a deployment) reserves here, decides elsewhere, then Commits or
// Releases, as allowAcross does over the slots of one Cluster.
func (l *Limiter) Reserve(ctx context.Context, ticket string, subjects []otp.Subject) (otp.Decision, error) {
	return l.decide(ctx, ticket, subjects, true)
}

// Commit keeps a reservation for good. It fails when a reservation expired
// first; the caller then takes the request back everywhere.
func (l *Limiter) Commit(ctx context.Context, ticket string, subjects []otp.Subject) error {
	if err := l.settle(ctx, ticket, settleCommit, l.slots(subjects)); err != nil {
		return fmt.Errorf("ratelimit: commit: %w", err)
	}
	return nil
}

// Release gives a reservation back.
func (l *Limiter) Release(ctx context.Context, ticket string, subjects []otp.Subject) error {
	if err := l.settle(ctx, ticket, settleRelease, l.slots(subjects)); err != nil {
		return fmt.Errorf("ratelimit: release: %w", err)
	}
	return nil
}

// Record adds an admission decided elsewhere (a region's fallback while this
// store's region was out of reach) to the subjects' windows at its own
// moment (microseconds, as the scripts score), so later decisions count it. Recording a ticket twice is harmless.
func (l *Limiter) Record(ctx context.Context, ticket string, at int64, subjects []otp.Subject) error {
	_, err := l.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, s := range subjects {
			var longest time.Duration
			for _, r := range s.Rules {
				longest = max(longest, r.Window)
			}
			p.ZAdd(ctx, l.key(s), redis.Z{Score: float64(at), Member: ticket})
			p.PExpire(ctx, l.key(s), longest)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("ratelimit: record: %w", err)
	}
	return nil
}
