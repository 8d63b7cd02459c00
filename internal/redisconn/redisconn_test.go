package redisconn

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/internal/redistopo"
)

func TestValidateNamesTheKey(t *testing.T) {
	ok := Options{URL: "redis://127.0.0.1:6379/0", Timeout: time.Second}
	tests := []struct {
		name string
		edit func(*Options)
		key  string // "" when valid
	}{
		{"single", func(o *Options) {}, ""},
		{"tls", func(o *Options) { o.URL = "rediss://user:pw@cache.internal:6380/1" }, ""},
		{"unix", func(o *Options) { o.URL = "unix:///run/redis.sock" }, ""},
		{"sentinel", func(o *Options) { o.SentinelMaster, o.SentinelAddrs = "m", []string{"10.0.0.1:26379", "[::1]:26379"} }, ""},
		{"cluster", func(o *Options) { o.ClusterAddrs = []string{"10.0.0.1:7000"} }, ""},
		{"scheme", func(o *Options) { o.URL = "http://x" }, "redis.url"},
		{"db", func(o *Options) { o.URL = "redis://h:1/x" }, "redis.url"},
		{"timeout", func(o *Options) { o.Timeout = 0 }, "redis.timeout"},
		{"pool", func(o *Options) { o.PoolSize = -1 }, "redis.pool_size"},
		{"master alone", func(o *Options) { o.SentinelMaster = "m" }, "redis.sentinel_addrs"},
		{"sentinels alone", func(o *Options) { o.SentinelAddrs = []string{"h:1"} }, "redis.sentinel_master"},
		{"sentinel addr", func(o *Options) { o.SentinelMaster, o.SentinelAddrs = "m", []string{"h"} }, "redis.sentinel_addrs[0]"},
		{"both", func(o *Options) {
			o.SentinelMaster, o.SentinelAddrs, o.ClusterAddrs = "m", []string{"h:1"}, []string{"h:2"}
		}, "redis.cluster_addrs"},
		{"cluster port", func(o *Options) { o.ClusterAddrs = []string{"h:0"} }, "redis.cluster_addrs[0]"},
		{"cluster db", func(o *Options) { o.URL, o.ClusterAddrs = "redis://h:1/2", []string{"h:2"} }, "redis.url"},
		{"unix and cluster", func(o *Options) { o.URL, o.ClusterAddrs = "unix:///s", []string{"h:2"} }, "redis.url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := ok
			tt.edit(&o)
			err := o.Validate()
			if tt.key == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tt.key+":") {
				t.Fatalf("error %v, want one naming %s", err, tt.key)
			}
		})
	}
}

func TestNewBuildsTheClientOfItsTopology(t *testing.T) {
	t.Run("rediss is TLS", func(t *testing.T) {
		c, err := New(Options{URL: "rediss://u:p@cache.internal:6380/3", Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		o := c.(*redis.Client).Options()
		if o.TLSConfig == nil || o.Username != "u" || o.Password != "p" || o.DB != 3 || o.MaxRetries > 0 || o.ReadTimeout != time.Second {
			t.Fatalf("options %+v", o)
		}
	})
	t.Run("cluster", func(t *testing.T) {
		cl := redistopo.StartCluster(t, 3)
		c, err := New(Options{URL: "redis://ignored:1/0", ClusterAddrs: cl.Addrs()[:1], Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, ok := c.(*redis.ClusterClient); !ok {
			t.Fatalf("%T, want a cluster client", c)
		}
		roundTrip(t, c)
	})
	t.Run("sentinel", func(t *testing.T) {
		s := redistopo.StartSentinel(t, 3, time.Second)
		c, err := New(Options{URL: "redis://ignored:1/0", SentinelMaster: s.Master, SentinelAddrs: s.SentinelAddrs(), Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		roundTrip(t, c)
		// It writes to the primary the sentinels name, not to the replica.
		pc := s.Primary.Client()
		defer pc.Close()
		if v, err := pc.Get(context.Background(), "k").Result(); err != nil || v != "v" {
			t.Fatalf("primary holds %q, %v", v, err)
		}
	})
}

func roundTrip(t *testing.T, c redis.UniversalClient) {
	t.Helper()
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("read back %q, %v", v, err)
	}
}
