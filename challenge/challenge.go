// Package challenge implements otp.ChallengeVerifier on the server-side
// siteverify APIs of Cloudflare Turnstile, hCaptcha and Google reCAPTCHA,
// which share one shape: a form POST of secret, response and remoteip,
// answered with {"success": bool, "error-codes": [...]} (and a score for
// reCAPTCHA v3 and hCaptcha Enterprise).
package challenge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"

	"smsgw/otp"
)

// Providers and their siteverify endpoints.
var endpoints = map[string]string{
	"turnstile": "https://challenges.cloudflare.com/turnstile/v0/siteverify",
	"hcaptcha":  "https://api.hcaptcha.com/siteverify",
	"recaptcha": "https://www.google.com/recaptcha/api/siteverify",
}

// maxToken bounds a token (Turnstile documents 2048 characters); a longer
// one is refused without asking the vendor.
const maxToken = 4096

// Config is the [pumping.challenge] section plus its secret, which comes from
// the environment (SMSGW_CHALLENGE_SECRET).
type Config struct {
	Provider string
	SiteKey  string
	Secret   string
	// VerifyURL replaces the vendor's endpoint (a proxy, or a test server).
	VerifyURL string
	// MinScore refuses a successful answer whose score is below it, when the
	// vendor gives one (reCAPTCHA v3); 0 ignores scores.
	MinScore float64
	Timeout  time.Duration
}

// On says whether a provider is configured.
func (c Config) On() bool { return c.Provider != "" }

// Validate names the first bad key.
func (c Config) Validate() error {
	if !c.On() {
		return nil
	}
	if _, ok := endpoints[c.Provider]; !ok {
		return fmt.Errorf("pumping.challenge.provider: want \"turnstile\", \"hcaptcha\", \"recaptcha\" or \"\", got %q", c.Provider)
	}
	if c.SiteKey == "" {
		return fmt.Errorf("pumping.challenge.site_key: required with a provider (frontends need it to show the challenge)")
	}
	if len(c.Secret) < 8 {
		return fmt.Errorf("SMSGW_CHALLENGE_SECRET: required with pumping.challenge.provider (the vendor's secret key)")
	}
	if c.VerifyURL != "" {
		u, err := url.Parse(c.VerifyURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("pumping.challenge.verify_url: not an http(s) URL: %q", c.VerifyURL)
		}
	}
	if c.MinScore < 0 || c.MinScore > 1 {
		return fmt.Errorf("pumping.challenge.min_score: want 0 to 1, got %v", c.MinScore)
	}
	if c.Timeout <= 0 {
		return fmt.Errorf("pumping.challenge.timeout: must be positive, got %s", c.Timeout)
	}
	return nil
}

// Verifier is an otp.ChallengeVerifier.
type Verifier struct {
	cfg      Config
	client   *http.Client
	outcomes *prometheus.CounterVec
}

var _ otp.ChallengeVerifier = (*Verifier)(nil)

// New returns a Verifier; cfg must be valid and on. Metrics are registered
// on reg unless it is nil.
func New(cfg Config, client *http.Client, reg prometheus.Registerer) *Verifier {
	if cfg.VerifyURL == "" {
		cfg.VerifyURL = endpoints[cfg.Provider]
	}
	if client == nil {
		client = &http.Client{Timeout: cfg.Timeout}
	}
	v := &Verifier{cfg: cfg, client: client, outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "smsgw_challenge_verifications_total",
		Help: "Bot-challenge tokens checked with the vendor, by outcome (passed, rejected, error).",
	}, []string{"outcome"})}
	if reg != nil {
		reg.MustRegister(v.outcomes)
	}
	return v
}

// Widget names the vendor and the public site key.
func (v *Verifier) Widget() otp.ChallengeWidget {
	return otp.ChallengeWidget{Provider: v.cfg.Provider, SiteKey: v.cfg.SiteKey}
}

// answer is what the three vendors' siteverify endpoints return.
type answer struct {
	Success    bool     `json:"success"`
	ErrorCodes []string `json:"error-codes"`
	Score      *float64 `json:"score"`
}

// Verify asks the vendor about token.
func (v *Verifier) Verify(ctx context.Context, token string, remoteIP netip.Addr) error {
	err := v.verify(ctx, token, remoteIP)
	switch err.(type) {
	case nil:
		v.outcomes.WithLabelValues("passed").Inc()
	case *otp.ChallengeRejected:
		v.outcomes.WithLabelValues("rejected").Inc()
	default:
		v.outcomes.WithLabelValues("error").Inc()
	}
	return err
}

func (v *Verifier) verify(ctx context.Context, token string, remoteIP netip.Addr) error {
	if token == "" || len(token) > maxToken || strings.ContainsFunc(token, func(r rune) bool { return unicode.IsControl(r) || r == unicode.ReplacementChar }) {
		return &otp.ChallengeRejected{Codes: []string{"invalid-input-response"}}
	}
	form := url.Values{"secret": {v.cfg.Secret}, "response": {token}}
	if remoteIP.IsValid() {
		form.Set("remoteip", remoteIP.Unmap().String())
	}
	ctx, cancel := context.WithTimeout(ctx, v.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, v.cfg.VerifyURL, strings.NewReader(form.Encode()))
	if err != nil {
		return fmt.Errorf("challenge: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := v.client.Do(req)
	if err != nil {
		return fmt.Errorf("challenge: %s: %w", v.cfg.Provider, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return fmt.Errorf("challenge: %s: reading the answer: %w", v.cfg.Provider, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("challenge: %s answered %d", v.cfg.Provider, resp.StatusCode)
	}
	var a answer
	if err := json.Unmarshal(body, &a); err != nil {
		return fmt.Errorf("challenge: %s: the answer is not JSON: %w", v.cfg.Provider, err)
	}
	if !a.Success {
		return &otp.ChallengeRejected{Codes: sanitize(a.ErrorCodes)}
	}
	if v.cfg.MinScore > 0 && a.Score != nil && *a.Score < v.cfg.MinScore {
		return &otp.ChallengeRejected{Codes: []string{fmt.Sprintf("score-below-%g", v.cfg.MinScore)}}
	}
	return nil
}

// sanitize keeps a vendor's error codes fit for logs: few, short, printable.
func sanitize(codes []string) []string {
	var out []string
	for _, c := range codes {
		if len(out) == 4 {
			break
		}
		if len(c) > 64 {
			c = c[:64]
		}
		out = append(out, strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f || r > 0x7e {
				return '?'
			}
			return r
		}, c))
	}
	return out
}
