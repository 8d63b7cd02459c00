package region

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/otp"
)

// carry is the local record of admissions made under fallback, one list
// per home region, emptied into the home's windows once it answers.
type carry struct {
	rdb    redis.UniversalClient
	prefix string
}

// entry is one fallback admission: its ticket, its moment on the local
// Redis clock (microseconds) and the home subjects it counts in.
type entry struct {
	Ticket   string          `json:"t"`
	At       int64           `json:"at"`
	Subjects []carriedWindow `json:"s"`
}

// carriedWindow is a subject as the home's windows need it: its key and
// how long it must be kept.
type carriedWindow struct {
	Key     string        `json:"k"`
	Longest time.Duration `json:"w"`
}

func carried(subjects []otp.Subject) []carriedWindow {
	out := make([]carriedWindow, len(subjects))
	for i, s := range subjects {
		out[i].Key = s.Key
		for _, r := range s.Rules {
			out[i].Longest = max(out[i].Longest, r.Window)
		}
	}
	return out
}

func (c carry) key(home string) string { return c.prefix + "{" + home + "}" }

func (c carry) add(ctx context.Context, home string, e entry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return c.rdb.RPush(ctx, c.key(home), b).Err()
}

// carryEvery is how often the lists are looked at; an empty one costs one
// LRANGE on the local Redis.
const carryEvery = 500 * time.Millisecond

// carryBatch bounds one carry.
const carryBatch = 200

func (d *Deployment) runCarry(ctx context.Context) error {
	t := time.NewTicker(carryEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		for _, home := range d.o.Remote {
			if _, err := d.carryOnce(ctx, &home); err != nil && ctx.Err() == nil {
				d.o.Log.DebugContext(ctx, "fallback admissions not carried yet", "home", home.Name, "err", err)
			}
		}
	}
}

// carryOnce records up to carryBatch fallback admissions in the home's
// windows, then removes exactly those from the list (LREM, so replicas of
// this region carrying at once lose nothing; recording twice is harmless).
func (d *Deployment) carryOnce(ctx context.Context, home *Store) (int, error) {
	key := d.carry.key(home.Name)
	raw, err := d.carry.rdb.LRange(ctx, key, 0, carryBatch-1).Result()
	if err != nil || len(raw) == 0 {
		return 0, err
	}
	for _, r := range raw {
		var e entry
		if err := json.Unmarshal([]byte(r), &e); err != nil {
			d.o.Log.WarnContext(ctx, "dropping an unreadable carry entry", "err", err)
			continue
		}
		subjects := make([]otp.Subject, len(e.Subjects))
		for i, w := range e.Subjects {
			subjects[i] = otp.Subject{Key: w.Key, Rules: []otp.Rule{{Window: w.Longest}}}
		}
		if err := home.Limiter.Record(ctx, e.Ticket, e.At, subjects); err != nil {
			return 0, fmt.Errorf("region %s: %w", home.Name, err)
		}
	}
	_, err = d.carry.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, r := range raw {
			p.LRem(ctx, key, 1, r)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	d.carried.Add(uint64(len(raw)))
	return len(raw), nil
}
