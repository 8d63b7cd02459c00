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
	"strings"
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
	u, err := parseURL(o.URL)
	if err != nil {
		return err
	}
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
	if len(o.ClusterAddrs) > 0 && u.db != 0 {
		return keyErr("url", "Redis Cluster has only db 0, got db %d", u.db)
	}
	if u.scheme == "unix" && o.Topology() != Single {
		return keyErr("url", "a unix socket cannot be used with Sentinel or Cluster")
	}
	return nil
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

// parsedURL is what the client takes from redis.url besides the address.
type parsedURL struct {
	scheme             string
	username, password string
	db                 int
}

func parseURL(raw string) (parsedURL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss" && u.Scheme != "unix") {
		return parsedURL{}, keyErr("url", "want redis://host:port/db or rediss://host:port/db, got %q", raw)
	}
	p := parsedURL{scheme: u.Scheme}
	if u.User != nil {
		p.username = u.User.Username()
		p.password, _ = u.User.Password()
	}
	if u.Scheme == "unix" {
		if _, err := redis.ParseURL(raw); err != nil {
			return parsedURL{}, &KeyError{Key: "url", Msg: err.Error(), Err: err}
		}
		return p, nil
	}
	if db := strings.Trim(u.Path, "/"); db != "" {
		p.db, err = strconv.Atoi(db)
		if err != nil || p.db < 0 {
			return parsedURL{}, keyErr("url", "db must be a number, got %q", db)
		}
	}
	return p, nil
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
	t := o.Timeout
	switch o.Topology() {
	case Single:
		opt, err := redis.ParseURL(o.URL)
		if err != nil {
			return nil, fmt.Errorf("redis.url: %w", err)
		}
		opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout, opt.PoolTimeout = t, t, t, t
		opt.ContextTimeoutEnabled = true
		opt.MaxRetries = -1
		opt.DialerRetries = 1
		if o.PoolSize > 0 {
			opt.PoolSize = o.PoolSize
		}
		return redis.NewClient(opt), nil
	case Sentinel:
		u, _ := parseURL(o.URL)
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:       o.SentinelMaster,
			SentinelAddrs:    o.SentinelAddrs,
			SentinelPassword: o.SentinelPassword,
			Username:         u.username,
			Password:         u.password,
			DB:               u.db,
			TLSConfig:        tlsConfig(u),
			DialTimeout:      t, ReadTimeout: t, WriteTimeout: t, PoolTimeout: t,
			ContextTimeoutEnabled: true,
			MaxRetries:            -1,
			DialerRetries:         1,
			PoolSize:              o.PoolSize,
		}), nil
	default:
		u, _ := parseURL(o.URL)
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:       o.ClusterAddrs,
			Username:    u.username,
			Password:    u.password,
			TLSConfig:   tlsConfig(u),
			DialTimeout: t, ReadTimeout: t, WriteTimeout: t, PoolTimeout: t,
			ContextTimeoutEnabled: true,
			// Redirects (MOVED, ASK) are followed; a dead node is not
			// retried past the request's own deadline.
			MaxRedirects:  3,
			MaxRetries:    -1,
			DialerRetries: 1,
			PoolSize:      o.PoolSize,
		}), nil
	}
}

func tlsConfig(u parsedURL) *tls.Config {
	if u.scheme != "rediss" {
		return nil
	}
	return &tls.Config{MinVersion: tls.VersionTLS12}
}
