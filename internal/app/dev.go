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

	"smsgw/pumping"
)

const devBanner = `
  ###############################################################
  #  smsgw DEV MODE: not for production.                        #
  #  In-process Redis (forgotten on exit), audit rows on stderr, #
  #  fake provider: texts and their codes are PRINTED below.     #
  #  Listening on loopback only.                                 #
%s  ###############################################################
`

// Banner lines on the pumping rules, by mode.
const (
	devShadow = `  #  Pumping rules in SHADOW mode: counted, nothing refused.    #
  #  To see them refuse: [pumping] mode = "enforce" in a file   #
  #  given with -config.                                        #
`
	devEnforce = `  #  Pumping rules ENFORCED ([pumping] mode in your config):    #
  #  unverified texts hold your address and number ranges.      #
`
	devOff = `  #  Pumping rules OFF ([pumping] mode in your config).         #
`
)

// devRedisTimeout is the least time -dev gives a call to its in-process store.
const devRedisTimeout = 5 * time.Second

// devConfig is cfg as -dev runs it: the fake provider, and the pumping rules
// in shadow mode unless the config names a mode. It refuses what dev mode
// must never do: listen beyond loopback, or text anyone for real.
func devConfig(cfg *Config) (*Config, error) {
	host, _, _ := net.SplitHostPort(cfg.Server.Listen)
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("server.listen: -dev listens on loopback only, not %q", cfg.Server.Listen)
	}
	c := *cfg
	switch names := c.providerNames(); {
	case len(names) == 0:
		c.Sender.Provider = "fake"
	case len(names) != 1 || names[0] != "fake":
		return nil, errors.New("sender.providers: -dev always uses the fake provider alone")
	}
	if c.Pumping.Mode == "" {
		c.Pumping.Mode = pumping.ModeShadow
	}
	// The in-process store has no network to stall on, and its first call
	// compiles the Lua scripts in this process: on a busy laptop that alone
	// can outlast the production budget and answer 503 for no reason.
	c.Redis.Timeout.Duration = max(c.Redis.Timeout.Duration, devRedisTimeout)
	return &c, nil
}

// devBannerFor is the banner, with what the pumping rules do.
func devBannerFor(mode string) string {
	switch mode {
	case pumping.ModeShadow:
		return fmt.Sprintf(devBanner, devShadow)
	case pumping.ModeOff:
		return fmt.Sprintf(devBanner, devOff)
	default:
		return fmt.Sprintf(devBanner, devEnforce)
	}
}

// startDev starts miniredis, which runs the same Lua scripts, in place of
// Redis, and says loudly what this is.
func (a *App) startDev(stderr io.Writer) (*redis.Client, error) {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		return nil, fmt.Errorf("dev redis: %w", err)
	}
	a.onClose(mr.Close)
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
	a.onClose(func() { rdb.Close() })
	fmt.Fprint(stderr, devBannerFor(a.cfg.Pumping.Mode))
	return rdb, nil
}
