// Package sender turns SMS providers into the otp.Sender the send flow uses:
// providers in order of preference, per-country routes, failover only when a
// provider certainly sent nothing, and a circuit breaker per provider.
// Providers live in packages named after what they wrap (sender/fake,
// sender/twilio, sender/gateway).
package sender

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"

	"smsgw/otp"
)

// Provider is one SMS gateway. Its errors are *otp.SendError whose Failure
// says what happened; any other error is an unknown outcome.
type Provider interface {
	Send(ctx context.Context, to, body string) (messageID string, err error)
}

// Named is a provider with the name it has in configuration and the audit log.
type Named struct {
	Name     string
	Provider Provider
}

// Options tune a Router. Zero values pick the defaults.
type Options struct {
	// Routes maps ISO 3166-1 alpha-2 countries to provider names in order,
	// replacing the default order for numbers of that country.
	Routes map[string][]string
	// BreakerFailures consecutive provider failures open its breaker
	// (default 5); it stays open for BreakerOpenFor (default 30s), then lets
	// one text through to probe.
	BreakerFailures uint32
	BreakerOpenFor  time.Duration
	Metrics         prometheus.Registerer
}

// Router is an otp.Sender over providers tried in order. It moves on to the
// next provider only when the previous one certainly sent nothing: after an
// unknown outcome a second text could reach the person twice. It never moves
// on from an unsubscribed number: the person said STOP.
type Router struct {
	order  []*route
	routes map[string][]*route
	m      *routerMetrics
}

type route struct {
	name     string
	provider Provider
	breaker  *gobreaker.CircuitBreaker[string]
}

// NewRouter returns a Router over providers, in order of preference.
func NewRouter(providers []Named, o Options) (*Router, error) {
	if len(providers) == 0 {
		return nil, errors.New("sender: no provider")
	}
	if o.BreakerFailures == 0 {
		o.BreakerFailures = 5
	}
	if o.BreakerOpenFor <= 0 {
		o.BreakerOpenFor = 30 * time.Second
	}
	r := &Router{routes: map[string][]*route{}, m: newRouterMetrics(o.Metrics)}
	byName := map[string]*route{}
	for _, p := range providers {
		if _, dup := byName[p.Name]; dup {
			return nil, fmt.Errorf("sender: provider %q listed twice", p.Name)
		}
		rt := &route{name: p.Name, provider: p.Provider}
		rt.breaker = gobreaker.NewCircuitBreaker[string](gobreaker.Settings{
			Name:        p.Name,
			MaxRequests: 1,
			Timeout:     o.BreakerOpenFor,
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= o.BreakerFailures },
			// A number the provider will not text says nothing about the
			// provider's health; only its own failures count.
			IsSuccessful:  func(err error) bool { return err == nil || !asSendError(p.Name, err).Failure.AgainstProvider() },
			OnStateChange: func(name string, _, to gobreaker.State) { r.m.breaker.WithLabelValues(name).Set(float64(to)) },
		})
		r.m.breaker.WithLabelValues(p.Name).Set(0)
		byName[p.Name] = rt
		r.order = append(r.order, rt)
	}
	for country, names := range o.Routes {
		if len(country) != 2 || strings.ToUpper(country) != country {
			return nil, fmt.Errorf("sender.routes.%s: not an upper-case ISO 3166-1 alpha-2 code", country)
		}
		for i, n := range names {
			rt, ok := byName[n]
			if !ok {
				return nil, fmt.Errorf("sender.routes.%s[%d]: %q is not a configured provider", country, i, n)
			}
			r.routes[country] = append(r.routes[country], rt)
		}
	}
	return r, nil
}

// Providers names the providers in default order.
func (r *Router) Providers() []string {
	out := make([]string, len(r.order))
	for i, rt := range r.order {
		out[i] = rt.name
	}
	return out
}

// Send hands the text to the first provider on the number's route that takes
// it.
func (r *Router) Send(ctx context.Context, to otp.Phone, body string) (otp.Receipt, error) {
	candidates := r.order
	if len(r.routes) > 0 {
		if rts, ok := r.routes[to.Country()]; ok {
			candidates = rts
		}
	}
	var last *otp.SendError
	for _, rt := range candidates {
		start := time.Now()
		id, err := rt.breaker.Execute(func() (string, error) { return rt.provider.Send(ctx, to.E164, body) })
		if err == nil {
			r.m.observe(rt.name, "sent", time.Since(start))
			if !otp.ValidMessageID(id) {
				// The text went out; its id is the provider's say, but not
				// one that gets into the audit trail as sent.
				id = otp.CleanProviderText(id, otp.MaxMessageID)
			}
			return otp.Receipt{Provider: rt.name, MessageID: id}, nil
		}
		se := asSendError(rt.name, err)
		if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
			r.m.observe(rt.name, "breaker_open", 0)
		} else {
			r.m.observe(rt.name, resultOf(se), time.Since(start))
		}
		last = se
		if !se.Failure.FailOver() {
			return otp.Receipt{}, se
		}
	}
	return otp.Receipt{}, last
}

func asSendError(provider string, err error) *otp.SendError {
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return &otp.SendError{Provider: provider, Failure: otp.ProviderDown, Reason: "breaker_open", Err: err}
	}
	var se *otp.SendError
	if errors.As(err, &se) {
		c := *se
		c.Provider = provider
		return &c
	}
	return &otp.SendError{Provider: provider, Reason: "error", Err: err}
}

func resultOf(se *otp.SendError) string {
	if se.NotSent() {
		return "not_sent:" + se.Reason
	}
	return "unknown:" + se.Reason
}

type routerMetrics struct {
	sends    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	breaker  *prometheus.GaugeVec
}

func newRouterMetrics(reg prometheus.Registerer) *routerMetrics {
	m := &routerMetrics{
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "smsgw_provider_sends_total",
			Help: "Texts handed to each provider by result: sent, not_sent:<reason>, unknown:<reason>, breaker_open.",
		}, []string{"provider", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "smsgw_provider_send_duration_seconds",
			Help:    "Provider call latency.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"provider"}),
		breaker: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "smsgw_provider_breaker_state",
			Help: "Circuit breaker of each provider: 0 closed, 1 half-open, 2 open.",
		}, []string{"provider"}),
	}
	if reg != nil {
		reg.MustRegister(m.sends, m.duration, m.breaker)
	}
	return m
}

func (m *routerMetrics) observe(provider, result string, d time.Duration) {
	m.sends.WithLabelValues(provider, result).Inc()
	if d > 0 {
		m.duration.WithLabelValues(provider).Observe(d.Seconds())
	}
}
