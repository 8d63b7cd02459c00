package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"time"
)

// retryPolicy is how often and how patiently a call is tried again.
type retryPolicy struct {
	attempts  int
	base, max time.Duration
}

// safety says which failures a call may be tried again after.
type safety int

const (
	// retryAnswered: the call is idempotent (a send with its
	// Idempotency-Key, a GET, a cancel): tried again after no answer, a
	// cut-off answer, 503 or 504.
	retryAnswered safety = iota
	// retryUnsent: the call changes state and has no key (a verify: a second
	// try could spend a guess, or find the code it just approved gone):
	// tried again only when no connection was made, so it never left.
	retryUnsent
)

// request is one logical call, sent as many times as its safety allows.
type request struct {
	method, path string
	body         any         // JSON; nil for none
	header       http.Header // extra headers (Idempotency-Key)
	safety       safety
}

// answer is a 2xx answer.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// do sends r, trying again where its safety and the policy allow, and
// returns a 2xx answer or the typed error of the last try.
func (c *Client) do(ctx context.Context, r request) (answer, error) {
	var payload []byte
	if r.body != nil {
		var err error
		if payload, err = json.Marshal(r.body); err != nil {
			return answer{}, fmt.Errorf("smsgw client: encode %s: %w", r.path, err)
		}
	}
	for try := 1; ; try++ {
		a, connected, err := c.once(ctx, r, payload)
		if err == nil {
			return a, nil
		}
		if ctx.Err() != nil {
			return answer{}, fmt.Errorf("smsgw client: %s %s: %w", r.method, r.path, ctx.Err())
		}
		wait, again := c.retryable(r.safety, connected, err)
		if !again || try >= c.retry.attempts {
			return answer{}, err
		}
		if b := c.backoff(try); b > wait {
			wait = b
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return answer{}, err // the wait would outlast the call
		}
		if c.sleep(ctx, wait) != nil {
			return answer{}, err
		}
	}
}

// retryable says whether err may be tried again under s, and the least wait
// smsgw asked for (Retry-After). connected says a connection was made, so
// the request may have reached smsgw.
func (c *Client) retryable(s safety, connected bool, err error) (time.Duration, bool) {
	var u *Unavailable
	if !errors.As(err, &u) {
		return 0, false // an answer of smsgw's: a 4xx, 500, 502 provider_error
	}
	if u.APIError == nil { // no answer
		return 0, s == retryAnswered || !connected
	}
	if s != retryAnswered || (u.StatusCode != http.StatusServiceUnavailable && u.StatusCode != http.StatusGatewayTimeout) {
		return 0, false
	}
	wait := u.retryAfter
	if wait > c.retry.max {
		return 0, false // smsgw asked for longer than this client waits
	}
	return wait, true
}

// backoff is the wait before try+1: base doubled per try up to max, the
// upper half of it at random so that callers refused together spread out.
func (c *Client) backoff(try int) time.Duration {
	d := c.retry.base
	for i := 1; i < try && d < c.retry.max; i++ {
		d *= 2
	}
	d = min(d, c.retry.max)
	if d <= 0 {
		return 0
	}
	return d/2 + mrand.N(d/2+1)
}

// once makes one try. A 2xx is returned as it is; any other answer as its
// typed error; no answer (or a cut-off one) as *Unavailable with the cause.
func (c *Client) once(ctx context.Context, r request, payload []byte) (answer, bool, error) {
	connected := false
	trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { connected = true }}
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), r.method, c.base+r.path, body)
	if err != nil {
		return answer{}, false, fmt.Errorf("smsgw client: %w", err)
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.agent)
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return answer{}, connected, &Unavailable{Err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, c.maxBody+1))
	if err != nil {
		return answer{}, true, &Unavailable{Err: fmt.Errorf("reading the answer: %w", err)}
	}
	if int64(len(b)) > c.maxBody {
		err := fmt.Errorf("the answer is larger than %d bytes", c.maxBody)
		if res.StatusCode/100 == 2 {
			return answer{}, true, &ProtocolError{StatusCode: res.StatusCode, Err: err}
		}
		b = nil // judged by its status alone
	}
	if res.StatusCode/100 != 2 {
		return answer{}, true, decodeError(res.StatusCode, res.Header, b)
	}
	return answer{status: res.StatusCode, header: res.Header, body: b}, true, nil
}

// decode reads a 2xx answer's JSON into v.
func (a answer) decode(v any) error {
	if err := json.Unmarshal(a.body, v); err != nil {
		return &ProtocolError{StatusCode: a.status, Err: err}
	}
	return nil
}

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// newIdempotencyKey is a random UUID (version 4): one per logical send.
func newIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
