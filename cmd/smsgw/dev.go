package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"smsgw/api"
	"smsgw/audit"
	"smsgw/otp"
	"smsgw/sender/fake"
)

const devBanner = `
  ###############################################################
  #  smsgw DEV MODE: not for production.                        #
  #  In-process Redis (forgotten on exit), audit rows on stderr, #
  #  fake provider: texts and their codes are PRINTED below.     #
  #  Listening on loopback only.                                 #
  ###############################################################
`

// serveDev runs the real service over stand-ins for its outside services:
// miniredis runs the same Lua limiter, audit rows go to stderr as JSON lines.
func serveDev(ctx context.Context, cfg *Config, sec secrets, log *slog.Logger, stderr io.Writer) error {
	host, _, _ := net.SplitHostPort(cfg.Server.Listen)
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("server.listen: -dev listens on loopback only, not %q", cfg.Server.Listen)
	}
	if names := cfg.providerNames(); len(names) != 1 || names[0] != "fake" {
		return errors.New("sender.providers: -dev always uses the fake provider alone")
	}
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		return fmt.Errorf("dev redis: %w", err)
	}
	defer mr.Close()
	// miniredis only ages keys when told to; let its TTLs follow the wall clock.
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				mr.FastForward(time.Second)
			}
		}
	}()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	fmt.Fprint(stderr, devBanner)
	if sec.code == "" {
		sec.code = otp.RandomSecret()
		log.Warn("SMSGW_SECRET is not set: using a random one; pending codes die with this process")
	}
	return serveHTTP(ctx, cfg, sec, log, newRegistry(), deps{
		rdb:      rdb,
		auditLog: audit.NewJSONLines(stderr),
		checks: []api.Check{
			{Name: "redis", Check: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }},
		},
		onText: func(m fake.Message) {
			fmt.Fprintf(stderr, "DEV text to %s: %q\n", m.To, m.Body)
		},
		closeAudit: func(context.Context) error { return nil },
	})
}
