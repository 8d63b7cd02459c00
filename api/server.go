// Package api is smsgw's HTTP interface: Echo handlers over the otp domain,
// the error envelope and the one table of error codes to statuses.
package api

import (
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
	// Twilio, when set, takes Twilio's delivery receipts.
	Twilio *TwilioWebhook
	// APIKeys, when any, are required on send and verify.
	APIKeys []APIKey
}

// Deps are what the handlers run on. Outbox is nil unless the fake provider
// is in use; AuditReader and Deliveries are nil without Postgres (dev mode).
type Deps struct {
	Service     *otp.Service
	AuditLog    otp.AuditLog
	AuditReader otp.AuditReader
	Deliveries  otp.DeliveryLog
	Pumping     otp.PumpingAdmin // nil when there is no pumping guard
	Outbox      Outbox
	Checks      []Check
	Metrics     *prometheus.Registry
}

// NewServer returns the HTTP handler of smsgw with every route wired to the
// dependencies it needs.
func NewServer(log *slog.Logger, cfg Config, d Deps) http.Handler {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = errorHandler(log)
	ips := NewClientIPs(cfg.TrustedProxies)
	e.IPExtractor = func(r *http.Request) string { return ips.Resolve(r).String() }
	m := newHTTPMetrics(d.Metrics)
	e.Use(withRequestContext(ips), observe(log, m), recoverPanics(log))
	addRoutes(e, log, cfg, d, m)
	return e
}
