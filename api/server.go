// Package api is smsgw's HTTP interface: one Server whose methods are the
// handlers over the otp domain, the error envelope and the one table of
// error codes to statuses. It imports the domain and no adapter.
package api

import (
	"crypto/sha256"
	"log/slog"
	"net/http"
	"net/netip"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"smsgw/otp"
)

// Config is what the HTTP layer needs from configuration.
type Config struct {
	TrustedProxies []netip.Prefix
	DefaultRegion  string
	// AdminToken enables the admin API; empty leaves it out (404).
	AdminToken  string
	MaxAttempts int
	// APIKeys, when any, are required on send and verify.
	APIKeys []APIKey
	// CORSOrigins may call send and verify from a browser.
	CORSOrigins []string
	// Warnings are what an operator must know about this configuration
	// (the fake provider outside -dev): /readyz lists them.
	Warnings []string
}

// Deps are what the handlers run on. None is nil: a part that is missing
// (no Postgres in dev mode) is a stand-in that says so in its errors.
type Deps struct {
	Service     *otp.Service
	AuditLog    otp.AuditLog
	AuditReader otp.AuditReader
	Pumping     otp.PumpingAdmin
	Checks      []Check
	Metrics     *prometheus.Registry
	// AdminFailures slows down wrong admin tokens per client address; the
	// console shares it, so guessing through both counts once.
	AdminFailures *otp.AuthFailures
	// Endpoints are the adapters' own routes (a provider's delivery
	// receipts, the fake outbox), mounted beside the service's.
	Endpoints []otp.Endpoint
}

// Server is the HTTP handler of smsgw; its methods are the handlers.
type Server struct {
	cfg Config
	Deps
	log        *slog.Logger
	m          *httpMetrics
	ips        *ClientIPs
	adminToken [32]byte // SHA-256 of cfg.AdminToken
	apiKeys    map[[32]byte]APIKey
	fanout     *fanout
	echo       *echo.Echo
	// heldRequests and heldAnswers are the refused path's memories
	// (held.go).
	heldRequests *heldRequests
	heldAnswers  *heldAnswers
}

// NewServer returns the HTTP handler of smsgw with every route mounted.
func NewServer(log *slog.Logger, cfg Config, d Deps) *Server {
	s := &Server{cfg: cfg, Deps: d, log: log, m: newHTTPMetrics(d.Metrics), ips: NewClientIPs(cfg.TrustedProxies),
		adminToken: sha256.Sum256([]byte(cfg.AdminToken)), apiKeys: make(map[[32]byte]APIKey, len(cfg.APIKeys)),
		fanout: newFanout(log, d.Metrics), heldRequests: newHeldRequests(), heldAnswers: newHeldAnswers()}
	for _, k := range cfg.APIKeys {
		s.apiKeys[k.SHA256] = k
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.answerError
	e.IPExtractor = func(r *http.Request) string { return s.ips.Resolve(r).String() }
	e.Use(s.withRequestContext, s.observe, s.recoverPanics, cors(cfg.CORSOrigins))
	s.echo = e
	s.routes()
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }
