package redistopo

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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

// A Cluster client given a link's seeds reaches every node through it (not
// the addresses the nodes announce), and a cut leaves it nothing.
func TestClusterLink(t *testing.T) {
	c := StartCluster(t, 3)
	l := NewClusterLink(t, c, 0)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: l.Addrs(), DialTimeout: time.Second, ReadTimeout: time.Second, MaxRedirects: 1})
	defer rdb.Close()
	ctx := context.Background()
	proxied := map[string]bool{}
	for _, a := range l.Addrs() {
		proxied[a] = true
	}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		if err := rdb.Set(ctx, "link:"+k, 1, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		m, err := rdb.MasterForKey(ctx, "link:"+k)
		if err != nil {
			t.Fatal(err)
		}
		if !proxied[m.Options().Addr] {
			t.Fatalf("key %s went to %s, not through the link %v", k, m.Options().Addr, l.Addrs())
		}
	}
	l.Cut()
	if err := rdb.Set(ctx, "link:a", 1, time.Minute).Err(); err == nil {
		t.Fatal("a write through a cut link succeeded")
	}
}
