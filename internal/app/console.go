package app

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"smsgw/api"
	"smsgw/console"
	"smsgw/otp"
)

// Wrong admin tokens, per client address and replica, on the admin API and
// the console sign-in together, before that address waits.
const (
	adminFailuresMax    = 10
	adminFailuresWindow = 15 * time.Minute
)

// consoleParts are what the console runs on besides the service.
type consoleParts struct {
	codes    console.Codes
	audit    console.Audit // nil without Postgres
	auditLog otp.AuditLog
	pumping  otp.PumpingAdmin
	failures *otp.AuthFailures
	metrics  prometheus.Gatherer
	warnings []string // shown on every page
	// verifications and events are nil without Postgres.
	verifications console.Verifications
	events        console.Events
}

// consoleEndpoints mounts the operators' console at /console, only when an
// admin token is set (the API answers 404 there otherwise).
func consoleEndpoints(cfg *Config, adminToken string, svc *otp.Service, p consoleParts, log *slog.Logger) []otp.Endpoint {
	if adminToken == "" {
		return nil
	}
	h := console.New(log, console.Options{
		AdminToken:    adminToken,
		DefaultRegion: cfg.Phone.DefaultRegion,
		MaxAttempts:   cfg.OTP.MaxAttempts,
		SessionTTL:    cfg.Console.SessionTTL.Duration,
		ClientIP:      api.NewClientIPs(cfg.trustedProxies).Resolve,
		StatusOf:      api.StatusOf,
		TextPrice:     cfg.textPrice,
		Warnings:      p.warnings,
	}, console.Deps{Support: svc, Codes: p.codes, AuditLog: p.auditLog, Audit: p.audit, Pumping: p.pumping,
		Metrics: p.metrics, Failures: p.failures, Verifications: p.verifications, Events: p.events, Keys: svc})
	serve := func(w http.ResponseWriter, r *http.Request) error {
		h.ServeHTTP(w, r)
		return nil
	}
	var out []otp.Endpoint
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		for _, path := range []string{"/console", "/console/*"} {
			out = append(out, otp.Endpoint{Method: method, Path: path, Handle: serve})
		}
	}
	return out
}
