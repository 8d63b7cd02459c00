package api

import (
	"log/slog"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"smsgw/otp"
)

// addRoutes lists every route of the service.
func addRoutes(
	e *echo.Echo,
	log *slog.Logger,
	cfg Config,
	svc *otp.Service,
	auditLog otp.AuditLog,
	auditReader otp.AuditReader,
	outbox Outbox,
	checks []Check,
	reg *prometheus.Registry,
	m *httpMetrics,
) {
	e.POST("/v1/otp/send", handleSend(svc, auditLog, log, m))
	e.POST("/v1/otp/verify", handleVerify(svc, auditLog, log, m))

	admin := e.Group("/v1/admin", requireAdmin(cfg.AdminToken, auditLog, log, m))
	admin.GET("/limits", handleAdminLimits(svc, cfg.MaxAttempts, auditLog, log, m))
	admin.DELETE("/limits", handleAdminLimits(svc, cfg.MaxAttempts, auditLog, log, m))
	admin.GET("/audit", handleAdminAudit(auditReader, cfg.DefaultRegion, auditLog, log, m))

	e.GET("/healthz", handleHealthz())
	e.GET("/readyz", handleReadyz(checks))
	e.GET("/metrics", handleMetrics(reg))

	if outbox != nil {
		e.GET("/v1/fake/messages", handleFakeMessages(outbox, cfg.DefaultRegion))
	}
}
