// Package redisconn builds smsgw's one Redis client from the [redis]
// settings: a single primary, a primary found through Redis Sentinel, or a
// Redis Cluster, all behind redis.UniversalClient.
package redisconn

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Topology is how the Redis smsgw talks to is laid out.
type Topology int

const (
	// Single is one primary at Options.URL (replicas, if any, are not used).
	Single Topology = iota
	// Sentinel is a primary that Redis Sentinel names and may replace.
	Sentinel
	// Cluster is a Redis Cluster; keys are spread over its shards.
	Cluster
)

func (t Topology) String() string {
	switch t {
	case Sentinel:
		return "sentinel"
	case Cluster:
		return "cluster"
	default:
		return "single"
	}
}

// Options are the [redis] settings that shape the client.
type Options struct {
	// URL is redis://[user:password@]host:port/db, or rediss:// for TLS.
	// With Sentinel or Cluster its host is not used, but its scheme (TLS,
	// to the sentinels too), credentials and db (Sentinel only) are.
	URL string
	// SentinelMaster and SentinelAddrs find the primary through Sentinel.
	SentinelMaster string
	SentinelAddrs  []string
	// SentinelPassword is the sentinels' own password, if they have one
	// (from the environment, never from the file).
	SentinelPassword string
	// ClusterAddrs are seed nodes of a Redis Cluster.
	ClusterAddrs []string
	// Timeout bounds every dial, read and write.
	Timeout time.Duration
	// PoolSize is connections per node; 0 is go-redis's default.
	PoolSize int
}

// Topology says which client New builds.
func (o Options) Topology() Topology {
	switch {
	case len(o.ClusterAddrs) > 0:
		return Cluster
	case o.SentinelMaster != "" || len(o.SentinelAddrs) > 0:
		return Sentinel
	default:
		return Single
	}
}

// KeyError is a setting Validate refuses, with its key under [redis]
// ("url", "sentinel_addrs[1]") apart from the message, so that a caller can
// name the key where it came from (an environment variable, a region's
// [region.redis.<name>]) without cutting the text.
type KeyError struct {
	Key string
	Msg string
	Err error // what the message came from, if anything
}

func (e *KeyError) Error() string { return "redis." + e.Key + ": " + e.Msg }

func (e *KeyError) Unwrap() error { return e.Err }

func keyErr(key, format string, a ...any) error {
	return &KeyError{Key: key, Msg: fmt.Sprintf(format, a...)}
}

// Validate checks the settings the way the configuration needs it, naming
// the key at fault.
func (o Options) Validate() error {
	if o.Timeout <= 0 {
		return keyErr("timeout", "must be positive")
	}
	if o.PoolSize < 0 {
		return keyErr("pool_size", "must not be negative")
	}
	if len(o.ClusterAddrs) > 0 && (o.SentinelMaster != "" || len(o.SentinelAddrs) > 0) {
		return keyErr("cluster_addrs", "set either cluster_addrs or sentinel_master with sentinel_addrs, not both")
	}
	if (o.SentinelMaster == "") != (len(o.SentinelAddrs) == 0) {
		if o.SentinelMaster == "" {
			return keyErr("sentinel_master", "must be set with sentinel_addrs (the name the sentinels monitor)")
		}
		return keyErr("sentinel_addrs", "must list the sentinels (host:port) with sentinel_master")
	}
	if err := checkAddrs("sentinel_addrs", o.SentinelAddrs); err != nil {
		return err
	}
	if err := checkAddrs("cluster_addrs", o.ClusterAddrs); err != nil {
		return err
	}
	_, err := o.parseURL()
	return err
}

func checkAddrs(key string, addrs []string) error {
	for i, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" {
			return keyErr(fmt.Sprintf("%s[%d]", key, i), "want host:port, got %q", a)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return keyErr(fmt.Sprintf("%s[%d]", key, i), "bad port in %q", a)
		}
	}
	return nil
}

// parsed is redis.url read by go-redis's own parser for o's topology
// (ParseURL, ParseFailoverURL, ParseClusterURL): exactly one is set.
// The URL's query parameters are go-redis's; the timeouts, retries and pool
// size New sets win over them.
type parsed struct {
	single   *redis.Options
	failover *redis.FailoverOptions
	cluster  *redis.ClusterOptions
}

func (o Options) parseURL() (parsed, error) {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss" && u.Scheme != "unix") {
		return parsed{}, keyErr("url", "want redis://host:port/db or rediss://host:port/db, got %q", redacted(o.URL, u))
	}
	if u.Scheme == "unix" && o.Topology() != Single {
		return parsed{}, keyErr("url", "a unix socket cannot be used with Sentinel or Cluster")
	}
	var p parsed
	db := 0
	switch o.Topology() {
	case Single:
		if p.single, err = redis.ParseURL(o.URL); err == nil {
			db = p.single.DB
		}
	case Sentinel:
		if p.failover, err = redis.ParseFailoverURL(o.URL); err == nil {
			db = p.failover.DB
		}
	default:
		// ParseClusterURL reads no path: the db is read as for one primary,
		// to refuse any but 0.
		var single *redis.Options
		if single, err = redis.ParseURL(o.URL); err == nil {
			db = single.DB
			p.cluster, err = redis.ParseClusterURL(o.URL)
		}
	}
	if err != nil {
		return parsed{}, &KeyError{Key: "url", Msg: fmt.Sprintf("%v, in %q", err, redacted(o.URL, u)), Err: err}
	}
	switch {
	case db < 0:
		return parsed{}, keyErr("url", "db must not be negative, got %d", db)
	case o.Topology() == Cluster && db != 0:
		return parsed{}, keyErr("url", "Redis Cluster has only db 0, got db %d", db)
	}
	return p, nil
}

// redacted is raw with its password hidden, for error messages: the URL may
// come from SMSGW_REDIS_URL with its credentials.
func redacted(raw string, u *url.URL) string {
	if u == nil {
		return "(not a URL)"
	}
	return u.Redacted()
}

// New builds the client for o (after Validate). Nothing is dialled yet.
//
// Every call is bounded by o.Timeout and never retried: a request waiting on
// a dead Redis fails closed (503) instead of waiting twice as long, and the
// client may try again. go-redis reconnects by itself; the Sentinel client
// follows a promoted primary on its own (it listens for +switch-master), and
// the Cluster client reloads its slot map on MOVED.
func New(o Options) (redis.UniversalClient, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	p, err := o.parseURL()
	if err != nil {
		return nil, err
	}
	t := o.Timeout
	switch {
	case p.single != nil:
		opt := p.single
		opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout, opt.PoolTimeout = t, t, t, t
		opt.ContextTimeoutEnabled = true
		opt.MaxRetries = -1
		opt.DialerRetries = 1
		if o.PoolSize > 0 {
			opt.PoolSize = o.PoolSize
		}
		return redis.NewClient(opt), nil
	case p.failover != nil:
		opt := p.failover
		// The URL's credentials are the data nodes' (go-redis reads them as
		// the sentinels'); the sentinels' own password comes from the
		// environment. The URL's host is none of the nodes.
		if opt.SentinelUsername != "" || opt.SentinelPassword != "" {
			opt.Username, opt.Password = opt.SentinelUsername, opt.SentinelPassword
		}
		opt.SentinelUsername, opt.SentinelPassword = "", o.SentinelPassword
		opt.MasterName, opt.SentinelAddrs = o.SentinelMaster, o.SentinelAddrs
		opt.TLSConfig = nodeTLS(opt.TLSConfig)
		opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout, opt.PoolTimeout = t, t, t, t
		opt.ContextTimeoutEnabled = true
		opt.MaxRetries = -1
		opt.DialerRetries = 1
		opt.PoolSize = o.PoolSize
		return redis.NewFailoverClient(opt), nil
	default:
		opt := p.cluster
		opt.Addrs = o.ClusterAddrs
		opt.TLSConfig = nodeTLS(opt.TLSConfig)
		opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout, opt.PoolTimeout = t, t, t, t
		opt.ContextTimeoutEnabled = true
		// Redirects (MOVED, ASK) are followed; a dead node is not
		// retried past the request's own deadline.
		opt.MaxRedirects = 3
		opt.MaxRetries = -1
		opt.DialerRetries = 1
		opt.PoolSize = o.PoolSize
		return redis.NewClusterClient(opt), nil
	}
}

// nodeTLS keeps TLS on (rediss://) for Sentinel and Cluster, without the
// server name the parsers take from the URL's host, which is none of the
// nodes: each connection checks the name it dialled.
func nodeTLS(c *tls.Config) *tls.Config {
	if c == nil {
		return nil
	}
	c = c.Clone()
	c.ServerName = ""
	c.MinVersion = max(c.MinVersion, tls.VersionTLS12)
	return c
}
