package api

import (
	"github.com/labstack/echo/v4"

	"smsgw/otp"
)

// routes lists every route of the service.
func (s *Server) routes() {
	e := s.echo
	e.POST("/v1/otp/send", s.handleSend, s.requireAPIKey(otp.KindSend))
	e.POST("/v1/otp/verify", s.handleVerify, s.requireAPIKey(otp.KindVerify))
	e.GET("/v1/otp/verifications/:id", s.handleGetVerification, s.requireCaller)
	e.POST("/v1/otp/verifications/:id/cancel", s.handleCancelVerification, s.requireCaller)

	admin := e.Group("/v1/admin", s.requireAdmin)
	admin.GET("/limits", s.handleAdminLimits)
	admin.DELETE("/limits", s.handleAdminLimits)
	admin.GET("/audit", s.handleAdminAudit)
	admin.GET("/pumping", s.handleAdminPumping)
	admin.DELETE("/pumping", s.handleAdminPumping)
	admin.GET("/overrides", s.handleAdminOverrides)
	admin.POST("/overrides", s.handleAdminOverrides)
	admin.DELETE("/overrides", s.handleAdminOverrides)

	e.GET("/healthz", s.handleHealthz)
	e.GET("/readyz", s.handleReadyz)
	e.GET("/metrics", s.handleMetrics())
	e.GET("/openapi.json", s.handleOpenAPI)

	for _, ep := range s.Endpoints {
		var guard []echo.MiddlewareFunc
		if ep.Admin {
			guard = append(guard, s.requireAdmin)
		}
		e.Add(ep.Method, ep.Path, func(c echo.Context) error { return ep.Handle(c.Response(), c.Request()) }, guard...)
	}
}
