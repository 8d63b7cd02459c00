package api

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"smsgw/otp"
)

// Check is one dependency /readyz asks about.
type Check struct {
	Name  string // "redis", "postgres"
	Check func(ctx context.Context) error
}

func (s *Server) handleHealthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// handleReadyz asks every dependency at once, each with a short deadline, so
// a hung dependency makes the probe fail rather than hang.
func (s *Server) handleReadyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), time.Second)
	defer cancel()
	results := make(map[string]string, len(s.Checks))
	var mu sync.Mutex
	var wg sync.WaitGroup
	var failed []string
	// The checks run at once, owned by this request: it waits for them all.
	for _, ch := range s.Checks {
		wg.Go(func() {
			status := "ok"
			if err := ch.Check(ctx); err != nil {
				status = "down: " + err.Error()
			}
			mu.Lock()
			defer mu.Unlock()
			results[ch.Name] = status
			if status != "ok" {
				failed = append(failed, ch.Name)
			}
		})
	}
	wg.Wait()
	if len(failed) > 0 {
		e := otp.Errorf(otp.EUnavailable, "not ready: %s not answering", strings.Join(failed, ", "))
		e.Fields = map[string]any{"checks": results, "failed": failed}
		if len(s.cfg.Warnings) > 0 {
			e.Fields["warnings"] = s.cfg.Warnings
		}
		return e
	}
	body := map[string]any{"status": "ready", "checks": results}
	if len(s.cfg.Warnings) > 0 {
		body["warnings"] = s.cfg.Warnings
	}
	return c.JSON(http.StatusOK, body)
}

func (s *Server) handleMetrics() echo.HandlerFunc {
	return echo.WrapHandler(promhttp.HandlerFor(s.Metrics, promhttp.HandlerOpts{}))
}
