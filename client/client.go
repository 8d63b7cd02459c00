// Package client is a Go client for smsgw's HTTP API (docs/api.md): send a
// code, verify it, look a verification up and cancel it, and check the
// signed events smsgw pushes to a backend (docs/events.md). It needs only
// the standard library, so a backend can take it without smsgw's own
// dependencies.
//
// Errors that a backend acts on are types, for errors.As: *RateLimited,
// *InvalidCode, *NoPendingCode, *PhoneNotAllowed, *ChallengeRequired,
// *NotPending, *Unavailable; every answer with smsgw's error envelope is an
// *APIError too (each typed error unwraps to it).
//
// Retries happen only where they cannot text twice or spend a guess (see
// retry.go): a send carries an Idempotency-Key made once per call and
// reused by its retries; a verify is retried only when it never left.
package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client calls one smsgw deployment. It is safe for concurrent use.
type Client struct {
	base    string // scheme://host[:port][/prefix], no trailing slash
	apiKey  string
	hc      *http.Client
	retry   retryPolicy
	sleep   func(ctx context.Context, d time.Duration) error
	newKey  func() string
	agent   string
	maxBody int64
}

// Option configures a Client.
type Option func(*Client)

// WithAPIKey sends key as "Authorization: Bearer <key>" on every call: a
// secret key, for a backend (it may forward client_ip and limit_keys when
// smsgw's config allows it).
func WithAPIKey(key string) Option { return func(c *Client) { c.apiKey = key } }

// WithHTTPClient uses hc for every attempt; its Timeout bounds one attempt,
// the call's context bounds the whole call with its retries.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithRetries sets how many times a call that may be retried is tried in
// all (1: never retried; default 3) and the backoff between tries: base,
// doubled each time up to max, with jitter. A Retry-After from smsgw is
// waited out instead when it is longer, unless it is longer than max: then
// the call gives up at once and returns the error.
func WithRetries(attempts int, base, max time.Duration) Option {
	return func(c *Client) {
		c.retry = retryPolicy{attempts: max1(attempts), base: base, max: max}
	}
}

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.agent = ua } }

func max1(n int) int {
	if n < 1 {
		return 1
	}
	return n
}

// New returns a client of the smsgw at baseURL (e.g.
// "http://smsgw.internal:8080").
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("smsgw client: the base URL must be absolute http(s), e.g. http://smsgw.internal:8080")
	}
	c := &Client{
		base:    strings.TrimRight(baseURL, "/"),
		hc:      &http.Client{Timeout: 15 * time.Second},
		retry:   retryPolicy{attempts: 3, base: 200 * time.Millisecond, max: 5 * time.Second},
		sleep:   sleepCtx,
		newKey:  newIdempotencyKey,
		agent:   "smsgw-go-client",
		maxBody: 1 << 20,
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}
