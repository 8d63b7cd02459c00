// Package gateway is a generic HTTP SMS provider for in-house SMS gateways
// (called "http" in configuration).
//
// Each text is one signed JSON POST to the gateway's URL:
//
//	POST <url>
//	Content-Type: application/json
//	Idempotency-Key: <id>
//	X-Smsgw-Timestamp: <unix seconds>
//	X-Smsgw-Signature: v1=<hex HMAC-SHA256(secret, timestamp + "." + body)>
//
//	{"id":"<id>","to":"<E.164>","body":"<text>"}
//
// id is fresh for every send, so a gateway can drop a request it already took.
// The gateway checks the signature with Verify, which also rejects timestamps
// older than a few minutes (replays), and answers 2xx with {"id":"<its message
// id>"} once it has taken the text.
package gateway

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"smsgw/otp"
)

const (
	// HeaderTimestamp carries the unix time (seconds) the request was signed.
	HeaderTimestamp = "X-Smsgw-Timestamp"
	// HeaderSignature carries "v1=<hex HMAC-SHA256>" over timestamp + "." + body.
	HeaderSignature = "X-Smsgw-Signature"
	// HeaderIdempotencyKey carries the same id as the JSON body.
	HeaderIdempotencyKey = "Idempotency-Key"

	// MinSecretLength is the shortest SMSGW_HTTP_SECRET accepted.
	MinSecretLength = 32
	// DefaultTimeout bounds a send when Config.Timeout is zero.
	DefaultTimeout = 10 * time.Second
	// DefaultTolerance is how old (or how far in the future) a timestamp may
	// be for Verify when it is given no positive tolerance.
	DefaultTolerance = 5 * time.Minute

	maxResponseBody = 64 << 10
	maxMessageID    = 255 // longer gateway ids are not kept: ours is used instead
	signaturePrefix = "v1="
)

// Config configures the provider.
type Config struct {
	// URL is the gateway's endpoint: an absolute http or https URL
	// (sender.http.url).
	URL string
	// Secret keys the request signatures (SMSGW_HTTP_SECRET); at least
	// MinSecretLength characters.
	Secret string
	// Timeout bounds one send, response included; zero means DefaultTimeout.
	Timeout time.Duration
}

// Provider sends texts through an in-house HTTP gateway. It is safe for
// concurrent use.
type Provider struct {
	url     string
	secret  []byte
	timeout time.Duration
	client  *http.Client
}

// New returns a provider for cfg. A nil client means a default one bounded by
// the timeout. Redirects are never followed, whatever client is given: the
// signed POST must reach the configured URL or fail.
func New(cfg Config, client *http.Client) (*Provider, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return nil, errors.New("sender.http.url: must be an absolute http:// or https:// URL")
	}
	if len(cfg.Secret) < MinSecretLength {
		return nil, fmt.Errorf("SMSGW_HTTP_SECRET: must be at least %d characters (got %d), e.g. `openssl rand -hex 32`", MinSecretLength, len(cfg.Secret))
	}
	if cfg.Timeout < 0 {
		return nil, errors.New("sender.http.timeout: must not be negative")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	var c http.Client
	if client != nil {
		c = *client
	} else {
		c.Timeout = cfg.Timeout
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Provider{url: cfg.URL, secret: []byte(cfg.Secret), timeout: cfg.Timeout, client: &c}, nil
}

type request struct {
	ID   string `json:"id"`
	To   string `json:"to"`
	Body string `json:"body"`
}

// Send posts the text to the gateway and returns the gateway's message id (or
// the id it sent, when the gateway answers 2xx without one). Failures are
// *otp.SendError:
//
//	request never written (DNS, dial, TLS, canceled)  network       not sent
//	written, then no answer (timeout, reset, cancel)  timeout       unknown
//	408                                               timeout       unknown
//	429                                               rate_limited  not sent
//	other 4xx                                         refused       not sent
//	500, 503                                          provider_5xx  not sent
//	502, 504, other 5xx                               provider_5xx  unknown
//	any other non-2xx (1xx, 3xx)                      unexpected_status  unknown
func (p *Provider) Send(ctx context.Context, to, body string) (string, error) {
	id := newID()
	payload, err := json.Marshal(request{ID: id, To: to, Body: body})
	if err != nil {
		return "", &otp.SendError{Failure: otp.ProviderDown, Reason: "error", Err: err}
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)

	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	// Whether the whole request went out decides between "certainly not
	// sent" and "unknown" when no answer comes back.
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				wrote.Store(true)
			}
		},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(payload))
	if err != nil {
		return "", &otp.SendError{Failure: otp.ProviderDown, Reason: "error", Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set(HeaderIdempotencyKey, id)
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderSignature, sign(p.secret, ts, payload))

	resp, err := p.client.Do(req)
	if err != nil {
		if wrote.Load() {
			return "", &otp.SendError{Failure: otp.OutcomeUnknown, Reason: "timeout", Err: err}
		}
		return "", &otp.SendError{Failure: otp.ProviderDown, Reason: "network", Err: err}
	}
	defer resp.Body.Close()
	// A failed read still leaves the status, which is what counts.
	raw, readErr := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))

	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		// The gateway took the text; a body without a usable id (not JSON,
		// cut short) does not change that.
		if readErr == nil {
			if gid := messageID(raw); gid != "" {
				return gid, nil
			}
		}
		return id, nil
	}
	se := classify(resp.StatusCode)
	se.Err = &StatusError{StatusCode: resp.StatusCode, Body: snippet(raw)}
	return "", se
}

func classify(code int) *otp.SendError {
	switch {
	case code == http.StatusRequestTimeout:
		return &otp.SendError{Failure: otp.OutcomeUnknown, Reason: "timeout"}
	case code == http.StatusTooManyRequests:
		return &otp.SendError{Failure: otp.ProviderDown, Reason: "rate_limited"}
	case code == http.StatusUnauthorized, code == http.StatusForbidden:
		// Our signature or secret is wrong: a provider problem (it opens the
		// breaker), not a problem with the number.
		return &otp.SendError{Failure: otp.ProviderDown, Reason: "auth"}
	case code >= 400 && code < 500:
		return &otp.SendError{Failure: otp.ProviderRefused, Reason: "refused"}
	case code == http.StatusInternalServerError, code == http.StatusServiceUnavailable:
		return &otp.SendError{Failure: otp.ProviderDown, Reason: "provider_5xx"}
	case code >= 500 && code < 600:
		return &otp.SendError{Failure: otp.OutcomeUnknown, Reason: "provider_5xx"}
	default:
		return &otp.SendError{Failure: otp.OutcomeUnknown, Reason: "unexpected_status"}
	}
}

// StatusError is the Err of a SendError for a non-2xx answer.
type StatusError struct {
	StatusCode int
	Body       string // the start of the answer's body, for the log
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("gateway answered %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Body != "" {
		msg += ": " + strconv.Quote(e.Body)
	}
	return msg
}

// snippet keeps the start of an error body, for the log, cleaned of
// anything a log line should not carry.
func snippet(b []byte) string {
	const n = 200
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		return otp.CleanProviderText(s, n) + "..."
	}
	return otp.CleanProviderText(s, n)
}

// messageID returns the "id" of a JSON answer, "" when there is no usable one.
func messageID(raw []byte) string {
	var r struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(raw, &r) != nil || len(r.ID) == 0 {
		return ""
	}
	var id string
	if json.Unmarshal(r.ID, &id) != nil {
		// A numeric id is kept as written.
		var n json.Number
		if json.Unmarshal(r.ID, &n) != nil {
			return ""
		}
		id = n.String()
	}
	id = strings.TrimSpace(id)
	if len(id) > maxMessageID || !otp.ValidMessageID(id) {
		// Not an id a receipt could name (NUL, control or bidi characters,
		// spaces, invalid UTF-8): ours is used instead.
		return ""
	}
	return id
}

// newID returns 128 random bits in hex: the id of one send.
func newID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand since Go 1.24)
	return hex.EncodeToString(b[:])
}

func sign(secret []byte, timestamp string, body []byte) string {
	return signaturePrefix + hex.EncodeToString(mac(secret, timestamp, body))
}

func mac(secret []byte, timestamp string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Errors of Verify.
var (
	ErrMalformed = errors.New("gateway: malformed timestamp or signature")
	ErrSignature = errors.New("gateway: signature does not match")
	ErrStale     = errors.New("gateway: timestamp outside the tolerance")
)

// Verify checks a request the way an in-house gateway should before taking
// it: timestamp and signature are the X-Smsgw-Timestamp and X-Smsgw-Signature
// headers, body the raw request body as received. The signature header may
// list several comma-separated "v1=" values (e.g. while the secret is
// rotated); one match is enough. Signatures are compared in constant time. A
// timestamp more than tolerance before or after now is rejected as a
// possible replay (tolerance <= 0 means DefaultTolerance); the gateway should
// also drop an id (Idempotency-Key) it has already taken.
func Verify(secret string, timestamp, signature string, body []byte, now time.Time, tolerance time.Duration) error {
	if secret == "" {
		return errors.New("gateway: empty secret")
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil || timestamp[0] == '+' || timestamp[0] == '-' {
		return fmt.Errorf("%w: timestamp %q", ErrMalformed, timestamp)
	}
	want := mac([]byte(secret), timestamp, body)
	found, match := false, false
	for part := range strings.SplitSeq(signature, ",") {
		hexSig, ok := strings.CutPrefix(strings.TrimSpace(part), signaturePrefix)
		if !ok {
			continue // another scheme
		}
		got, err := hex.DecodeString(hexSig)
		if err != nil || len(got) != sha256.Size {
			continue
		}
		found = true
		if hmac.Equal(got, want) {
			match = true
		}
	}
	if !found {
		return fmt.Errorf("%w: no v1 signature", ErrMalformed)
	}
	if !match {
		return ErrSignature
	}
	age := now.Sub(time.Unix(ts, 0))
	if age > tolerance || age < -tolerance {
		return fmt.Errorf("%w: signed %s ago", ErrStale, age.Truncate(time.Second))
	}
	return nil
}
