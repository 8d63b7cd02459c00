package api_test

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"smsgw/audit"
	"smsgw/internal/app"
	"smsgw/internal/app/apptest"
	"smsgw/internal/testenv"
	"smsgw/pumping"
)

// benchHandler is the service with the shipped defaults as the in-process
// handler benchmarks run it: the refusal cache on, the pumping rules
// shadowing, the audit writer on Postgres, requests forwarded from
// 127.0.0.1. It is the handler alone, served into a recorder.
func benchHandler(b *testing.B) http.Handler {
	rdb, prefix := testenv.Redis(b)
	pool := testenv.Pool(b)
	writer, err := audit.NewWriter(pool, audit.Options{SpoolDir: b.TempDir()}, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	go writer.Run(context.Background())
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		writer.Close(ctx)
	})
	shadow := pumping.DefaultConfig()
	shadow.Mode = pumping.ModeShadow
	svc := apptest.New(b, apptest.Options{Redis: rdb, Prefix: prefix, Pumping: &shadow, AuditLog: writer,
		Config: func(c *app.Config) {
			c.Server.TrustedProxies = []string{"127.0.0.0/8"}
			c.Limits.LocalRefusalCache = 100000
		}})
	return svc.App.Handler
}
