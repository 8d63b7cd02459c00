// Package twilio is the SMS provider backed by Twilio's Programmable Messaging
// API (POST /2010-04-01/Accounts/{sid}/Messages.json), through twilio-go.
//
// Send tells a refusal (nothing was sent, the quota can be given back) from an
// unknown outcome (the request reached Twilio, or may have, and the text may
// still arrive): see classify for the rules. The package also has the helpers
// the delivery-receipt webhook needs: ValidSignature and ParseStatus.
package twilio

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twilio/twilio-go/client"
	api "github.com/twilio/twilio-go/rest/api/v2010"

	"smsgw/otp"
)

// DefaultAPIBase is where requests go when Config.APIBase is empty.
const DefaultAPIBase = "https://api.twilio.com"

// DefaultTimeout bounds one Send when Config.Timeout is zero (twilio-go's own
// default).
const DefaultTimeout = 10 * time.Second

// Config is the Twilio provider's configuration. Exactly one of From and
// MessagingServiceSID is set.
type Config struct {
	AccountSID          string // TWILIO_ACCOUNT_SID
	AuthToken           string // TWILIO_AUTH_TOKEN
	From                string // sender.twilio.from: a Twilio number, short code or alphanumeric sender ID
	MessagingServiceSID string // sender.twilio.messaging_service_sid ("MG...")
	// APIBase replaces the scheme and host of every request (and prefixes the
	// path when it has one): "https://api.twilio.com" (default), a regional
	// edge such as "https://api.dublin.ie1.twilio.com", or a test server.
	APIBase string // sender.twilio.api_base
	// StatusCallbackURL, when set, is sent as StatusCallback so Twilio posts
	// delivery receipts there.
	StatusCallbackURL string
	// Timeout bounds one Send, on top of the caller's context. Zero means
	// DefaultTimeout.
	Timeout time.Duration // sender.timeout
}

// Provider sends texts through Twilio. It is safe for concurrent use.
type Provider struct {
	accountSID, authToken  string
	from, messagingService string
	statusCallback         string
	base                   *url.URL
	timeout                time.Duration
	transport              http.RoundTripper // shared: keeps the connection pool across sends
}

// New checks cfg and returns a provider. Errors name the config key at fault.
func New(cfg Config) (*Provider, error) {
	// Values are used as given, not trimmed: the webhook checks signatures
	// with the same token and callback URL, and must agree with Send.
	for _, kv := range [][2]string{
		{"TWILIO_ACCOUNT_SID", cfg.AccountSID}, {"TWILIO_AUTH_TOKEN", cfg.AuthToken},
		{"sender.twilio.from", cfg.From}, {"sender.twilio.messaging_service_sid", cfg.MessagingServiceSID},
		{"sender.twilio.api_base", cfg.APIBase}, {"sender.twilio.status_callback_url", cfg.StatusCallbackURL},
	} {
		if strings.TrimSpace(kv[1]) != kv[1] {
			return nil, fmt.Errorf("%s: has leading or trailing spaces", kv[0])
		}
	}
	sid, token, from, msid := cfg.AccountSID, cfg.AuthToken, cfg.From, cfg.MessagingServiceSID

	switch {
	case sid == "":
		return nil, errors.New("TWILIO_ACCOUNT_SID: required for the twilio provider")
	case !isSID(sid, "AC"):
		return nil, errors.New(`TWILIO_ACCOUNT_SID: want "AC" followed by 32 letters or digits`)
	case token == "":
		return nil, errors.New("TWILIO_AUTH_TOKEN: required for the twilio provider")
	case !isAlnum(token):
		// twilio-go refuses to send with such a token (its error 21224).
		return nil, errors.New("TWILIO_AUTH_TOKEN: must be letters and digits only")
	case from == "" && msid == "":
		return nil, errors.New("sender.twilio.from: set it or sender.twilio.messaging_service_sid")
	case from != "" && msid != "":
		return nil, errors.New("sender.twilio.from: set either it or sender.twilio.messaging_service_sid, not both")
	case msid != "" && !isSID(msid, "MG"):
		return nil, errors.New(`sender.twilio.messaging_service_sid: want "MG" followed by 32 letters or digits`)
	case cfg.Timeout < 0:
		return nil, errors.New("sender.timeout: must not be negative")
	}

	rawBase := cfg.APIBase
	if rawBase == "" {
		rawBase = DefaultAPIBase
	}
	base, err := parseHTTPURL(rawBase)
	if err != nil {
		return nil, fmt.Errorf("sender.twilio.api_base: %w", err)
	}
	if base.RawQuery != "" || base.ForceQuery || base.Fragment != "" {
		return nil, fmt.Errorf("sender.twilio.api_base: %q: no query or fragment allowed", rawBase)
	}
	if base.User != nil {
		return nil, fmt.Errorf("sender.twilio.api_base: %q: no user info allowed (credentials come from TWILIO_ACCOUNT_SID/TWILIO_AUTH_TOKEN)", rawBase)
	}
	base.Path = strings.TrimRight(base.Path, "/")
	base.RawPath = strings.TrimRight(base.RawPath, "/")

	callback := cfg.StatusCallbackURL
	if callback != "" {
		if _, err := parseHTTPURL(callback); err != nil {
			return nil, fmt.Errorf("sender.twilio.status_callback_url: %w", err)
		}
	}

	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}

	return &Provider{
		accountSID:       sid,
		authToken:        token,
		from:             from,
		messagingService: msid,
		statusCallback:   callback,
		base:             base,
		timeout:          timeout,
		transport:        http.DefaultTransport.(*http.Transport).Clone(),
	}, nil
}

func parseHTTPURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%q is not a URL: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%q: want an http or https URL", raw)
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, fmt.Errorf("%q: no host", raw)
	}
	return u, nil
}

// Send hands one text to Twilio and returns the message SID ("SM...").
// Failures are *otp.SendError; their Failure is OutcomeUnknown unless
// Twilio certainly did not take the text.
func (p *Provider) Send(ctx context.Context, to, body string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", &otp.SendError{Provider: "twilio", Failure: otp.ProviderDown, Reason: "network", Err: fmt.Errorf("twilio: not sent: %w", err)}
	}
	if to == "" {
		return "", &otp.SendError{Provider: "twilio", Failure: otp.NumberProblem, Reason: "invalid_number", Err: errors.New("twilio: empty recipient")}
	}

	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()

	st := &callState{}
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			// Err nil: the whole request (headers and body) was handed to
			// the connection (HTTP/1: to its write buffer, flushed right
			// after; a failing flush then counts as possibly sent, the
			// cautious side). Err set: the write failed part way, and an
			// incomplete request is not acted on. Sticky: a request
			// written once may be acted on even if the transport retries.
			if info.Err == nil {
				st.wrote.Store(true)
			}
		},
	})

	// twilio-go builds its requests on context.Background() and has no way to
	// take a context, so every Send gets its own thin client whose transport
	// puts ctx (deadline, cancellation, trace) on the request and sends it to
	// the configured base. The connection pool (p.transport) is shared.
	hc := &http.Client{
		Transport: &rewriter{base: p.base, ctx: ctx, next: p.transport, st: st},
		// Like twilio-go's default client: never follow redirects, hand the
		// 3xx back.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	c := &client.Client{
		Credentials:         client.NewCredentials(p.accountSID, p.authToken),
		HTTPClient:          hc,
		UserAgentExtensions: []string{"smsgw"},
	}
	c.SetAccountSid(p.accountSID)
	handler := client.NewRequestHandler(c)
	// NewRequestHandler reads TWILIO_EDGE / TWILIO_REGION and would rewrite
	// the host; APIBase is the one place that picks the host here.
	handler.Edge, handler.Region = "", ""
	svc := api.NewApiService(handler)

	params := &api.CreateMessageParams{}
	params.SetTo(to)
	params.SetBody(body)
	if p.messagingService != "" {
		params.SetMessagingServiceSid(p.messagingService)
	} else {
		params.SetFrom(p.from)
	}
	if p.statusCallback != "" {
		params.SetStatusCallback(p.statusCallback)
	}

	msg, err := svc.CreateMessage(params)
	if err != nil {
		return "", classify(ctx, err, st)
	}
	if s := st.status.Load(); s < 200 || s > 299 {
		// twilio-go takes a 3xx for success. A redirect is not Twilio's
		// Messages endpoint creating a message (api_base is probably wrong).
		return "", &otp.SendError{Provider: "twilio", Failure: otp.ProviderRefused, Reason: "refused", Err: fmt.Errorf("twilio: unexpected HTTP %d answer (redirect?)", s)}
	}
	if msg == nil || msg.Sid == nil || !(isSID(*msg.Sid, "SM") || isSID(*msg.Sid, "MM")) {
		// The request went through with a success status; the message most
		// likely exists but we cannot name it (no sid, or something that is
		// not one: what it sent is not kept).
		return "", &otp.SendError{Provider: "twilio", Failure: otp.OutcomeUnknown, Reason: "bad_response",
			Err: fmt.Errorf("twilio: HTTP %d answer has no valid message sid", st.status.Load())}
	}
	return *msg.Sid, nil
}

// callState is what the transport saw during one Send.
type callState struct {
	wrote  atomic.Bool            // the full request was written at least once
	status atomic.Int32           // HTTP status of the response, 0 if none came
	url    atomic.Pointer[string] // where the request really went
}

// rewriter sends twilio-go's requests (built for https://api.twilio.com) to
// base, on ctx.
type rewriter struct {
	base *url.URL
	ctx  context.Context
	next http.RoundTripper
	st   *callState
}

func (r *rewriter) RoundTrip(req *http.Request) (*http.Response, error) {
	out := req.Clone(r.ctx)
	u := *req.URL
	u.Scheme = r.base.Scheme
	u.Host = r.base.Host
	if r.base.Path != "" {
		// twilio-go's paths are plain ASCII; keep any escaping both sides have.
		u.Path = r.base.Path + req.URL.Path
		u.RawPath = ""
		if r.base.RawPath != "" || req.URL.RawPath != "" {
			u.RawPath = r.base.EscapedPath() + req.URL.EscapedPath()
		}
	}
	out.URL = &u
	// http.NewRequest set Host to api.twilio.com; let it follow the URL.
	out.Host = ""
	target := u.String()
	r.st.url.Store(&target)
	resp, err := r.next.RoundTrip(out)
	if resp != nil {
		r.st.status.Store(int32(resp.StatusCode))
	}
	return resp, err
}

// Twilio error codes with a reason of their own. All mean the message was not
// created.
var codeReasons = map[int]struct {
	reason  string
	failure otp.Failure
}{
	21211: {"invalid_number", otp.NumberProblem},     // invalid 'To' phone number
	21614: {"not_mobile", otp.NumberProblem},         // 'To' number is not a valid mobile number
	21408: {"region_not_enabled", otp.NumberProblem}, // permission to send to this region not enabled
	21612: {"unreachable", otp.NumberProblem},        // 'To' not currently reachable via SMS (no route)
	21610: {"unsubscribed", otp.OptedOut},            // recipient replied STOP
	20003: {"auth", otp.ProviderDown},                // authentication failed
	20429: {"rate_limited", otp.ProviderDown},        // too many requests
}

// classify turns CreateMessage's error into an *otp.SendError.
//
//   - An HTTP answer came (status known from the transport, or from Twilio's
//     error body): Twilio code first (codeReasons) for non-5xx answers, then
//     the status: 401 auth, 429 rate_limited, other 3xx/4xx refused, all not
//     sent; 500 and 503 provider_5xx not sent (Twilio answered itself and
//     created nothing); 502, 504 and any other 5xx provider_5xx with an
//     unknown outcome (a gateway may have passed the request on); a 2xx whose
//     body could not be read is bad_response (or timeout), unknown outcome.
//   - No answer, and the request was never fully written (dial, DNS, refused,
//     TLS, cancellation before the write): network, not sent.
//   - No answer after the request was written: timeout (deadline) or network
//     (reset, cancellation), unknown outcome.
func classify(ctx context.Context, err error, st *callState) *otp.SendError {
	// net/http names the URL twilio-go built (https://api.twilio.com/...) in
	// its errors, not the one the transport used: name the real one.
	var ue *url.Error
	if target := st.url.Load(); target != nil && errors.As(err, &ue) {
		ue.URL = *target
	}
	status := int(st.status.Load())
	var rest *client.TwilioRestError
	isRest := errors.As(err, &rest)
	if status == 0 && isRest {
		// An error body without a response seen by the transport: twilio-go
		// made it up before sending (its credential check).
		status = rest.Status
	}

	if status != 0 {
		wrapped := err
		if !isRest {
			wrapped = fmt.Errorf("twilio: HTTP %d: %w", status, err)
		}
		if isRest && status < 500 {
			if known, ok := codeReasons[rest.Code]; ok {
				return &otp.SendError{Provider: "twilio", Failure: known.failure, Reason: known.reason, Err: wrapped}
			}
		}
		switch {
		case status >= 200 && status < 300:
			reason := "bad_response"
			if isTimeout(ctx, err) {
				reason = "timeout"
			}
			return &otp.SendError{Provider: "twilio", Failure: otp.OutcomeUnknown, Reason: reason, Err: wrapped}
		case status == http.StatusUnauthorized:
			return &otp.SendError{Provider: "twilio", Failure: otp.ProviderDown, Reason: "auth", Err: wrapped}
		case status == http.StatusTooManyRequests:
			return &otp.SendError{Provider: "twilio", Failure: otp.ProviderDown, Reason: "rate_limited", Err: wrapped}
		case status < 500:
			return &otp.SendError{Provider: "twilio", Failure: otp.ProviderRefused, Reason: "refused", Err: wrapped}
		case status == http.StatusInternalServerError, status == http.StatusServiceUnavailable:
			return &otp.SendError{Provider: "twilio", Failure: otp.ProviderDown, Reason: "provider_5xx", Err: wrapped}
		default:
			return &otp.SendError{Provider: "twilio", Failure: otp.OutcomeUnknown, Reason: "provider_5xx", Err: wrapped}
		}
	}

	if !st.wrote.Load() {
		return &otp.SendError{Provider: "twilio", Failure: otp.ProviderDown, Reason: "network", Err: fmt.Errorf("twilio: request not sent: %w", err)}
	}
	reason := "network"
	if isTimeout(ctx, err) {
		reason = "timeout"
	}
	return &otp.SendError{Provider: "twilio", Failure: otp.OutcomeUnknown, Reason: reason, Err: fmt.Errorf("twilio: no answer after the request was sent: %w", err)}
}

func isTimeout(ctx context.Context, err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return true
	}
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

func isAlnum(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}

// isSID reports whether s is a Twilio SID with the given two-letter prefix:
// 34 characters, letters and digits.
func isSID(s, prefix string) bool {
	return len(s) == 34 && strings.HasPrefix(s, prefix) && isAlnum(s)
}
