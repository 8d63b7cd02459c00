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
}

// NewServer returns the HTTP handler of smsgw with every route wired to the
// dependencies it needs. outbox is nil unless the fake provider is in use;
// auditReader is nil when there is no Postgres to read (dev mode).
func NewServer(
	log *slog.Logger,
	cfg Config,
	svc *otp.Service,
	auditLog otp.AuditLog,
	auditReader otp.AuditReader,
	outbox Outbox,
	checks []Check,
	reg *prometheus.Registry,
) http.Handler {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = errorHandler(log)
	ips := NewClientIPs(cfg.TrustedProxies)
	e.IPExtractor = func(r *http.Request) string { return ips.Resolve(r).String() }
	m := newHTTPMetrics(reg)
	e.Use(withRequestContext(ips), observe(log, m), recoverPanics(log))
	addRoutes(e, log, cfg, svc, auditLog, auditReader, outbox, checks, reg, m)
	return e
}
