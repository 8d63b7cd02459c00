package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

const devBanner = `
  ###############################################################
  #  smsgw DEV MODE: not for production.                        #
  #  In-process Redis (forgotten on exit), audit rows on stderr, #
  #  fake provider: texts and their codes are PRINTED below.     #
  #  Listening on loopback only.                                 #
  ###############################################################
`

// checkDev refuses what dev mode must never do: listen beyond loopback, or
// text anyone for real.
func checkDev(cfg *Config) error {
	host, _, _ := net.SplitHostPort(cfg.Server.Listen)
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("server.listen: -dev listens on loopback only, not %q", cfg.Server.Listen)
	}
	if names := cfg.providerNames(); len(names) != 1 || names[0] != "fake" {
		return errors.New("sender.providers: -dev always uses the fake provider alone")
	}
	return nil
}

// startDev starts miniredis, which runs the same Lua scripts, in place of
// Redis, and says loudly what this is.
func (a *App) startDev(stderr io.Writer) (*redis.Client, error) {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		return nil, fmt.Errorf("dev redis: %w", err)
	}
	a.closers = append(a.closers, mr.Close)
	// miniredis only ages keys when told to; let its TTLs follow the wall clock.
	a.loops = append(a.loops, loop{"dev redis clock", func(ctx context.Context) error {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
				mr.FastForward(time.Second)
			}
		}
	}})
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	a.closers = append(a.closers, func() { rdb.Close() })
	fmt.Fprint(stderr, devBanner)
	return rdb, nil
}
