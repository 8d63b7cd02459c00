package region

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// HomeScripts runs the scripts of a country's destination state that is
// not windows (the pumping guard's range and country budgets) in the
// country's home region. With a fallback allowed and the home out of reach,
// they run on the local Redis instead: the same keys there are this
// region's local share of those budgets, counted from nothing, while the
// fallback windows bound how many texts it lets through. Nil for a country
// homed here: its scripts run as in a single region.
func (d *Deployment) HomeScripts(country string) Scripts {
	home := d.home(country)
	if home == d.local {
		return nil
	}
	return homeScripts{d: d, home: home}
}

type homeScripts struct {
	d    *Deployment
	home *Store
}

func (h homeScripts) Run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	cmd := h.home.Scripts.Run(ctx, script, keys, args...)
	if h.d.fallsBack(h.home, cmd.Err()) {
		return h.d.local.Scripts.Run(ctx, script, keys, args...)
	}
	return cmd
}
