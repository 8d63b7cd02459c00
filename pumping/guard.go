// Package pumping implements otp.PumpingGuard on Redis: budgets of
// unverified texts per number range, country and client network, earned by
// approved codes, and a money ceiling, decided and counted in one atomic
// script per Redis slot; operators' overrides; and a per-replica memory of
// refusals so a flood on a held subject costs no Redis call.
package pumping

import (
	"context"
	"embed"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"smsgw/internal/luascript"
	"smsgw/internal/redisbatch"
	"smsgw/otp"
)

// bucket is the width of one counter; a window is a whole number of them.
const bucket = time.Hour

// Guard is an otp.PumpingGuard and otp.PumpingAdmin.
type Guard struct {
	rdb     redis.UniversalClient
	prefix  string
	cfg     Config
	log     *slog.Logger
	scripts Scripts
	// cluster splits a decision into one script call per hash tag.
	cluster bool
	// home runs the destination group's scripts (nil: scripts).
	home  func(country string) Scripts
	holds *holdCache
	// nearSeen remembers the subjects recently written to the "near their
	// budget" list, so a busy one costs one write a minute, not one a text.
	nearSeen *holdCache
	// netSignal remembers, on Cluster, what the caller group last said of a
	// network's signal (see signalKey), so the destination's call, made in
	// parallel, can be told it; approvals change slowly.
	netSignal *holdCache
	overrides *overrideStore
	m         *metrics
	// clock replaces Redis TIME; only tests and the simulation set it.
	clock func(context.Context) time.Time
	// head is decide.lua's arguments that every call of the guard holds
	// alike, made on the first call (decideBase).
	head atomic.Pointer[decideHead]
}

// luaFiles are the package's scripts, each loaded after the prelude every
// script shares (package luascript) and the hash fields' names (fields.go).
//
//go:embed *.lua
var luaFiles embed.FS

var (
	decideScript  = luascript.Script(luaFiles, "decide.lua", fieldsLua)
	approveScript = luascript.Script(luaFiles, "approve.lua", fieldsLua)
	releaseScript = luascript.Script(luaFiles, "release.lua", fieldsLua)
)

var (
	_ otp.PumpingGuard = (*Guard)(nil)
	_ otp.PumpingAdmin = (*Guard)(nil)
	_ otp.Overrides    = (*Guard)(nil)
)

// Options tune a Guard; zero values pick the defaults.
type Options struct {
	Log        *slog.Logger
	Registerer prometheus.Registerer
	// Cluster is set when rdb is a Redis Cluster client.
	Cluster bool
	// Clock replaces Redis TIME: tests move it, and the simulation decides
	// many sends at once, each at its own virtual time carried in its ctx.
	Clock func(context.Context) time.Time
	// HoldEntries bounds the memory of refusals (default 100,000).
	HoldEntries int
	// Home, when set (several regions), runs the destination group's
	// scripts in the country's home region; the rest run on Scripts.
	// It returns nil for a country homed here.
	Home func(country string) Scripts
	// Scripts runs the guard's scripts: the limiter's *redisbatch.Batcher
	// shares round trips (and WAITs for min_replicas_acked) with the
	// limiter's and the code store's calls. Nil gives the guard a batcher of
	// its own.
	Scripts Scripts
}

// Scripts runs Redis scripts (redisbatch.Scripts, one interface for every
// package that runs them).
type Scripts = redisbatch.Scripts

// New returns a Guard whose keys start with prefix (e.g. "smsgw:"). cfg must
// be valid.
func New(rdb redis.UniversalClient, prefix string, cfg Config, o Options) *Guard {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.HoldEntries <= 0 {
		o.HoldEntries = 100_000
	}
	if o.Scripts == nil {
		o.Scripts = redisbatch.New(rdb, redisbatch.Options{})
	}
	g := &Guard{scripts: o.Scripts,
		rdb: rdb, prefix: prefix, cfg: cfg, log: o.Log, cluster: o.Cluster, home: o.Home, clock: o.Clock,
		holds: newHoldCache(o.HoldEntries), nearSeen: newHoldCache(10_000), netSignal: newHoldCache(o.HoldEntries),
		m: newMetrics(o.Registerer),
	}
	g.overrides = newOverrideStore(rdb, prefix+"pump:{ov}", g.now)
	return g
}

// now is the guard's clock for what it keeps in memory.
func (g *Guard) now() time.Time { return g.nowCtx(context.Background()) }

func (g *Guard) nowCtx(ctx context.Context) time.Time {
	if g.clock != nil {
		return g.clock(ctx)
	}
	return time.Now()
}

// redisNow is the scripts' now: "" for Redis TIME, so replicas agree.
func (g *Guard) redisNow(ctx context.Context) any {
	if g.clock != nil {
		return g.clock(ctx).UnixMilli()
	}
	return ""
}

// Held answers from memory.
func (g *Guard) Held(phone otp.Phone, ip netip.Addr) (otp.PumpingRefusal, bool) {
	if g.holds.empty() {
		return otp.PumpingRefusal{}, false
	}
	now := g.now()
	for _, grp := range g.groups(phone, ip) {
		for _, s := range grp.subjects {
			if r, ok := g.holds.get(holdKey(scope(s.rule), s.id), now); ok {
				g.m.refused(r.Rule, countryOf(phone), ModeEnforce, r.Subject)
				return r, true
			}
		}
	}
	return otp.PumpingRefusal{}, false
}

// groups lists the subject groups a send is decided on: in off mode only the
// money ceiling, which is configured explicitly, remains.
func (g *Guard) groups(phone otp.Phone, ip netip.Addr) []group {
	out := make([]group, 0, 3)
	if g.cfg.Mode != ModeOff {
		// The destination group always goes: its record of the phone is
		// how an approval finds the networks to credit.
		out = append(out, g.destination(phone))
		if c := g.caller(ip, countryOf(phone)); len(c.subjects) > 0 {
			out = append(out, c)
		}
	}
	if s := g.spend(phone); len(s.subjects) > 0 {
		out = append(out, s)
	}
	return out
}

// scriptsFor runs a group's scripts: the destination group's in the
// number's home region when there are several.
func (g *Guard) scriptsFor(grp group, country string) Scripts {
	if grp.record != "" {
		if s := g.homeScripts(country); s != nil {
			return s
		}
	}
	return g.scripts
}

// homeScripts runs scripts in a country's home region; nil when it is
// this one.
func (g *Guard) homeScripts(country string) Scripts {
	if g.home == nil {
		return nil
	}
	return g.home(country)
}

// mode is how decide.lua treats a rule that would refuse this send.
func (g *Guard) mode(bypass bool) decideMode {
	switch {
	case bypass:
		return modeBypass
	case g.cfg.Mode == ModeShadow:
		return modeShadow
	}
	return modeEnforce
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func ms(d time.Duration) int64 { return max(int64(d/time.Millisecond), 0) }
