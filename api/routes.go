package api

import (
	"log/slog"

	"github.com/labstack/echo/v4"

	"smsgw/otp"
)

// addRoutes lists every route of the service.
func addRoutes(e *echo.Echo, log *slog.Logger, cfg Config, d Deps, m *httpMetrics) {
	e.POST("/v1/otp/send", handleSend(d.Service, d.AuditLog, log, m),
		requireAPIKey(cfg.APIKeys, otp.KindSend, d.AuditLog, log, m))
	e.POST("/v1/otp/verify", handleVerify(d.Service, d.AuditLog, log, m),
		requireAPIKey(cfg.APIKeys, otp.KindVerify, d.AuditLog, log, m))

	admin := e.Group("/v1/admin", requireAdmin(cfg.AdminToken, d.AuditLog, log, m))
	admin.GET("/limits", handleAdminLimits(d.Service, cfg.MaxAttempts, d.AuditLog, log, m))
	admin.DELETE("/limits", handleAdminLimits(d.Service, cfg.MaxAttempts, d.AuditLog, log, m))
	admin.GET("/audit", handleAdminAudit(d.AuditReader, cfg.DefaultRegion, d.AuditLog, log, m))
	if d.Pumping != nil {
		admin.GET("/pumping", handleAdminPumping(d.Pumping, d.AuditLog, log, m))
		admin.DELETE("/pumping", handleAdminPumping(d.Pumping, d.AuditLog, log, m))
		admin.GET("/overrides", handleAdminOverrides(d.Pumping, d.AuditLog, log, m))
		admin.POST("/overrides", handleAdminOverrides(d.Pumping, d.AuditLog, log, m))
		admin.DELETE("/overrides", handleAdminOverrides(d.Pumping, d.AuditLog, log, m))
	}

	if cfg.Twilio != nil && d.Deliveries != nil {
		e.POST("/v1/webhooks/twilio/status", handleTwilioStatus(*cfg.Twilio, d.Deliveries, log, m))
	}

	e.GET("/healthz", handleHealthz())
	e.GET("/readyz", handleReadyz(d.Checks))
	e.GET("/metrics", handleMetrics(d.Metrics))

	if d.Outbox != nil {
		e.GET("/v1/fake/messages", handleFakeMessages(d.Outbox, cfg.DefaultRegion))
	}
}
