package api

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"smsgw/otp"
	"smsgw/sender/fake"
)

// Check is one dependency /readyz asks about.
type Check struct {
	Name  string // "redis", "postgres"
	Check func(ctx context.Context) error
}

func handleHealthz() echo.HandlerFunc {
	return func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
	}
}

// handleReadyz asks every dependency at once, each with a short deadline, so
// a hung dependency makes the probe fail rather than hang.
func handleReadyz(checks []Check) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), time.Second)
		defer cancel()
		results := make(map[string]string, len(checks))
		var mu sync.Mutex
		var wg sync.WaitGroup
		var failed []string
		for _, ch := range checks {
			wg.Add(1)
			go func() {
				defer wg.Done()
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
			}()
		}
		wg.Wait()
		if len(failed) > 0 {
			e := otp.Errorf(otp.EUnavailable, "not ready: %s not answering", strings.Join(failed, ", "))
			e.Fields = map[string]any{"checks": results, "failed": failed}
			return c.JSON(http.StatusServiceUnavailable, errorBody(e))
		}
		return c.JSON(http.StatusOK, map[string]any{"status": "ready", "checks": results})
	}
}

func handleMetrics(reg *prometheus.Registry) echo.HandlerFunc {
	return echo.WrapHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
}

// Outbox is what the fake provider keeps.
type Outbox interface {
	Messages(phone string) []fake.Message
}

// handleFakeMessages lists the fake provider's texts, oldest first. A phone
// in the query is normalized like a send's, so "+1 415..." and a "+" that
// arrived as a space (an unencoded query) both work.
func handleFakeMessages(outbox Outbox, defaultRegion string) echo.HandlerFunc {
	return func(c echo.Context) error {
		phone, err := queryPhone(c, defaultRegion)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, outbox.Messages(phone))
	}
}
