package region

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"smsgw/otp"
)

// TestLimitKeyLivesWhereAnswered: a caller-defined limit key is counted in
// the region that answers, like an address (docs/regions.md): racing sends
// with one key value through two regions admit exactly its max in each,
// and deciding it never crosses to another region.
func TestLimitKeyLivesWhereAnswered(t *testing.T) {
	ctx := context.Background()
	p := newPair(t, 0)
	const max, perRegion = 3, 20
	// The key alone: no number, so nothing has a home elsewhere.
	key := []otp.Subject{
		{Scope: otp.KeyScope, Key: "send:key:user_id:9f86d081", Name: "user_id", Rules: []otp.Rule{{Window: time.Hour, Max: max}}},
	}
	// Warm both regions' connections so that counting crossings is exact.
	for _, d := range []*Deployment{p.a, p.b} {
		if _, err := d.Limiter().Allow(ctx, ticket(), subjects("+14155550199", "US", "192.0.2.9", 5, 5)); err != nil {
			t.Fatal(err)
		}
	}
	crossedAB, crossedBA := p.aToB.Requests(), p.bToA.Requests()
	admitted := map[string]*atomic.Int64{"a": {}, "b": {}}
	var wg sync.WaitGroup
	for i := range 2 * perRegion {
		name, d := "a", p.a
		if i%2 == 1 {
			name, d = "b", p.b
		}
		wg.Go(func() {
			dec, err := d.Limiter().Allow(ctx, ticket(), key)
			if err != nil {
				t.Error(err)
				return
			}
			if dec.Allowed {
				admitted[name].Add(1)
			}
		})
	}
	wg.Wait()
	for name, n := range admitted {
		if n.Load() != max {
			t.Errorf("region %s admitted %d sends of one key value, want exactly %d", name, n.Load(), max)
		}
	}
	if n, m := p.aToB.Requests()-crossedAB, p.bToA.Requests()-crossedBA; n != 0 || m != 0 {
		t.Errorf("deciding a limit key crossed regions: %d a→b and %d b→a requests, want none", n, m)
	}
}
