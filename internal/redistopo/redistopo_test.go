package redistopo

import (
	"context"
	"testing"
	"time"
)

func TestTopologies(t *testing.T) {
	t.Run("cluster", func(t *testing.T) {
		c := StartCluster(t, 3)
		rdb := c.Client()
		defer rdb.Close()
		ctx := context.Background()
		masters := map[string]bool{}
		for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
			if err := rdb.Set(ctx, k, 1, time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			m, err := rdb.MasterForKey(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			masters[m.Options().Addr] = true
		}
		if len(masters) != 3 {
			t.Fatalf("keys landed on %d masters, want 3", len(masters))
		}
	})
	t.Run("sentinel", func(t *testing.T) {
		s := StartSentinel(t, 3, time.Second)
		if len(s.SentinelAddrs()) != 3 {
			t.Fatal("want 3 sentinels")
		}
	})
}
