package redisconn

import (
	"context"
	"crypto/tls"
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
		{"unix and sentinel", func(o *Options) { o.URL, o.SentinelMaster, o.SentinelAddrs = "unix:///s", "m", []string{"h:1"} }, "redis.url"},
		{"negative db", func(o *Options) { o.URL = "redis://h:1/-1" }, "redis.url"},
		{"unknown option", func(o *Options) { o.URL = "redis://h:1/0?no_such_option=1" }, "redis.url"},
		{"sentinel db", func(o *Options) {
			o.URL, o.SentinelMaster, o.SentinelAddrs = "redis://h:1/x", "m", []string{"h:1"}
		}, "redis.url"},
		{"cluster path", func(o *Options) { o.URL, o.ClusterAddrs = "redis://h:1/0/1", []string{"h:2"} }, "redis.url"},
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

func TestAURLErrorHidesThePassword(t *testing.T) {
	for _, raw := range []string{"http://user:s3cret@h:1/0", "redis://user:s3cret@h:1/x", "redis://user:s3cret@h:1/0?bad=1"} {
		err := Options{URL: raw, Timeout: time.Second}.Validate()
		if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.HasPrefix(err.Error(), "redis.url:") {
			t.Fatalf("%s: error %v, want one naming redis.url without the password", raw, err)
		}
	}
}

// TestTheURLsCredentialsAreTheNodes: on every topology the URL's user and
// password reach the data nodes, the sentinels' password comes apart, and
// rediss:// is TLS checked against the name each connection dials.
func TestTheURLsCredentialsAreTheNodes(t *testing.T) {
	url := "rediss://u:p@ignored.example:6380/3"
	s, err := New(Options{URL: url, SentinelMaster: "m", SentinelAddrs: []string{"10.0.0.1:26379"},
		SentinelPassword: "sp", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	so := s.(*redis.Client).Options()
	if so.Username != "u" || so.Password != "p" || so.DB != 3 || so.TLSConfig == nil || so.TLSConfig.ServerName != "" ||
		so.TLSConfig.MinVersion < tls.VersionTLS12 || so.MaxRetries > 0 || so.ReadTimeout != time.Second {
		t.Fatalf("sentinel's node options %+v", so)
	}
	c, err := New(Options{URL: "rediss://u:p@ignored.example:6380/0", ClusterAddrs: []string{"10.0.0.1:7000"}, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	co := c.(*redis.ClusterClient).Options()
	if co.Username != "u" || co.Password != "p" || len(co.Addrs) != 1 || co.Addrs[0] != "10.0.0.1:7000" ||
		co.TLSConfig == nil || co.TLSConfig.ServerName != "" || co.TLSConfig.MinVersion < tls.VersionTLS12 ||
		co.MaxRetries > 0 || co.MaxRedirects != 3 || co.ReadTimeout != time.Second {
		t.Fatalf("cluster options %+v", co)
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
