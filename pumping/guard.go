// Package pumping implements otp.PumpingGuard on Redis: budgets of
// unverified texts per number range, country and client network, earned by
// approved codes, and a money ceiling, decided and counted in one atomic
// script per Redis slot; operators' overrides; and a per-replica memory of
// refusals so a flood on a held subject costs no Redis call.
package pumping

import (
	"context"
	"embed"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"sync"
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
}

// luaFiles are the package's scripts, each loaded after the prelude every
// script shares (package luascript).
//
//go:embed *.lua
var luaFiles embed.FS

var (
	decideScript  = luascript.Script(luaFiles, "decide.lua")
	approveScript = luascript.Script(luaFiles, "approve.lua")
	releaseScript = luascript.Script(luaFiles, "release.lua")
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
	var out []group
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

// call is one script call: the groups it decided, and what release needs.
type call struct {
	grp      group
	bucket   int64
	recorded int64 // 1 the phone was counted anew, 2 a resend counted again
	cnew     int64 // what the country counted anew (see decide.lua)
	reply    decideReply
	// country routes the release of a destination group (several regions).
	country string
}

// reservation is the Ticket of an otp.PumpingReservation.
type reservation struct {
	phone string
	calls []call
}

// Reserve decides and counts.
func (g *Guard) Reserve(ctx context.Context, phone otp.Phone, ip netip.Addr, bypass bool) (otp.PumpingReservation, error) {
	groups := g.groups(phone, ip)
	if len(groups) == 0 {
		return otp.PumpingReservation{}, nil
	}
	mode := g.mode(bypass)
	if !g.cluster && g.homeScripts(phone.Country()) == nil {
		groups = []group{merge(groups)}
	}
	calls := make([]call, len(groups))
	errs := make([]error, len(groups))
	netid := networkID(ip)
	now := g.nowCtx(ctx)
	if len(groups) == 1 {
		// One call holds every group there is: a country it restricts reads
		// the caller's networks itself, or has none to ask about.
		calls[0], errs[0] = g.decide(ctx, groups[0], phone, netid, mode, "")
	} else {
		var wg sync.WaitGroup
		for i := range groups {
			wg.Go(func() {
				calls[i], errs[i] = g.decide(ctx, groups[i], phone, netid, mode, g.signalFor(groups[i], true, ip, countryOf(phone), now))
			})
		}
		wg.Wait()
		g.askAgain(ctx, groups, calls, errs, phone, ip, netid, mode, now)
	}
	return g.conclude(ctx, phone, mode, calls, errs)
}

// askAgain remembers what the caller's call said of its networks' signal
// and asks a restricted country that answered verdictAskAgain again with
// it: calls made apart, one per group.
func (g *Guard) askAgain(ctx context.Context, groups []group, calls []call, errs []error, phone otp.Phone, ip netip.Addr, netid string, mode decideMode, now time.Time) {
	sig := g.noteCallerSignal(calls, errs, phone, ip, now)
	for i, c := range calls {
		if errs[i] == nil && c.reply.verdict == verdictAskAgain {
			calls[i], errs[i] = g.decide(ctx, groups[i], phone, netid, mode, signalArg(sig))
		}
	}
}

// noteCallerSignal remembers the signal the caller's call (the group with
// no phone record) reported of its networks, and returns it (-1: none).
// errs may be nil when every call answered.
func (g *Guard) noteCallerSignal(calls []call, errs []error, phone otp.Phone, ip netip.Addr, now time.Time) int64 {
	sig := int64(-1)
	for i, c := range calls {
		if (errs == nil || errs[i] == nil) && c.grp.record == "" && c.reply.signal >= 0 {
			sig = c.reply.signal
			g.noteSignal(ip, countryOf(phone), sig, now)
		}
	}
	return sig
}

// releaseCounted takes back what the calls that counted the send counted
// (errs may be nil when every call answered); failing, it logs msg.
func (g *Guard) releaseCounted(ctx context.Context, phone otp.Phone, calls []call, errs []error, msg string) {
	var counted []call
	for i, c := range calls {
		if (errs == nil || errs[i] == nil) && c.reply.verdict.counted() {
			counted = append(counted, c)
		}
	}
	if len(counted) == 0 {
		return
	}
	res := otp.PumpingReservation{Ticket: &reservation{phone: phone.E164, calls: counted}}
	if err := g.Release(context.WithoutCancel(ctx), res); err != nil {
		g.log.WarnContext(ctx, msg, "err", err)
	}
}

// conclude turns a send's decide.lua calls into its reservation: a refusal
// or failure of one takes back what the others counted; a refusal is
// remembered and listed, a subject near its budget listed.
func (g *Guard) conclude(ctx context.Context, phone otp.Phone, mode decideMode, calls []call, errs []error) (otp.PumpingReservation, error) {
	res := otp.PumpingReservation{}
	var refusedSubject subject
	var counted []call
	var failed error
	for i, c := range calls {
		if errs[i] != nil {
			failed = errs[i]
			continue
		}
		verdict, rule := c.reply.verdict, c.reply.rule
		// Asked again and still without the caller's signal: nothing was
		// counted, so it is a refusal, never an admission.
		refused := !verdict.counted()
		if !refused {
			counted = append(counted, c)
		}
		if rule > 0 {
			r, s := g.refusal(c)
			if refused {
				if res.Refused == nil {
					res.Refused, refusedSubject = &r, s
				}
			} else if res.Shadow == nil && mode == modeShadow {
				res.Shadow = &r
			}
		}
		g.noteNear(ctx, c)
	}
	if failed == nil && res.Refused == nil {
		counted = g.giveBackFreeResend(ctx, phone, counted)
	}
	res.Ticket = &reservation{phone: phone.E164, calls: counted}
	if failed != nil || res.Refused != nil {
		// Another group refused or failed: take back what the others counted.
		if len(counted) > 0 {
			if err := g.Release(context.WithoutCancel(ctx), res); err != nil {
				g.log.WarnContext(ctx, "releasing a partial pumping reservation failed", "err", err)
			}
		}
		res.Ticket = nil
	}
	if failed != nil {
		return otp.PumpingReservation{}, failed
	}
	country := countryOf(phone)
	switch {
	case res.Refused != nil:
		g.m.refused(res.Refused.Rule, country, ModeEnforce, res.Refused.Subject)
		g.remember(ctx, *res.Refused, refusedSubject)
	case res.Shadow != nil:
		g.m.refused(res.Shadow.Rule, country, ModeShadow, res.Shadow.Subject)
	}
	return res, nil
}

// merge joins groups for one call on a single primary: the script reads
// keys in order, so the destination group's record stays first.
func merge(groups []group) group {
	out := group{}
	for _, grp := range groups {
		if grp.record != "" {
			out.record = grp.record
		}
	}
	for _, grp := range groups {
		out.subjects = append(out.subjects, grp.subjects...)
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

// decideArgs is one group's decide.lua ARGV for a send.
func (g *Guard) decideArgs(ctx context.Context, grp group, phone otp.Phone, netid string, mode decideMode, signal string) decideArgs {
	_, tail := returningBlock(phone)
	a := decideArgs{now: g.redisNow(ctx), bucket: bucket, buckets: int64(g.cfg.Window / bucket), mode: mode,
		ratio: g.cfg.Ratio, hourFactor: g.cfg.HourFactor, restrictFor: g.cfg.RestrictFor, phone: phone.E164,
		netid: netid, record: grp.record != "", probeEvery: g.cfg.ProbeEvery, signal: signal, tail: tail,
		returningDays: int64((g.cfg.ReturningFor + 24*time.Hour - 1) / (24 * time.Hour)),
		subjects:      make([]decideSubject, 0, len(grp.subjects))}
	for _, s := range grp.subjects {
		switch s.kind {
		case 'm':
			a.subjects = append(a.subjects, decideSubject{"m", s.price,
				strconv.FormatInt(micros(g.cfg.Spend.Hour), 10) + " " + strconv.FormatInt(micros(g.cfg.Spend.Day), 10)})
		case 'c':
			a.subjects = append(a.subjects, decideSubject{s.arg(), s.floor, flag(g.cfg.ChallengeBudget)})
		default:
			a.subjects = append(a.subjects, decideSubject{s.arg(), s.floor, ""})
		}
	}
	return a
}

func (g *Guard) decide(ctx context.Context, grp group, phone otp.Phone, netid string, mode decideMode, signal string) (call, error) {
	v, err := g.scriptsFor(grp, phone.Country()).Run(ctx, decideScript, grp.keys(), g.decideArgs(ctx, grp, phone, netid, mode, signal).argv()...).Result()
	if err != nil {
		return call{}, fmt.Errorf("pumping: decide: %w", err)
	}
	return readCall(grp, phone, v)
}

// readCall reads a group's decide.lua reply into what release needs.
func readCall(grp group, phone otp.Phone, v any) (call, error) {
	r, err := parseDecideReply(v, len(grp.subjects))
	if err != nil {
		return call{}, fmt.Errorf("pumping: decide: %w", err)
	}
	return call{grp: grp, bucket: r.bucket, recorded: r.recorded, cnew: r.countryNew, reply: r, country: phone.Country()}, nil
}

// refusal describes the rule a call's reply names.
func (g *Guard) refusal(c call) (otp.PumpingRefusal, subject) {
	s := c.grp.subjects[c.reply.rule-1]
	used, limit := float64(c.reply.used), float64(c.reply.budget)
	rule := s.rule
	window := g.cfg.Window
	if s.kind == 'm' {
		used, limit = used/1e6, limit/1e6
		if c.reply.budget == micros(g.cfg.Spend.Hour) && g.cfg.Spend.Hour > 0 && (g.cfg.Spend.Day == 0 || c.reply.budget != micros(g.cfg.Spend.Day)) {
			rule, window = RuleSpendHour, time.Hour
		}
	}
	return otp.PumpingRefusal{
		Rule: rule, Scope: scope(rule), Subject: s.id, Used: used, Limit: limit, Window: window,
		RetryAfter: max(c.reply.retry, time.Second),
	}, s
}

// Release takes back what a reservation counted.
func (g *Guard) Release(ctx context.Context, r otp.PumpingReservation) error {
	t, ok := r.Ticket.(*reservation)
	if !ok || t == nil {
		return nil
	}
	var first error
	for _, c := range t.calls {
		args := make([]any, 0, 4+2*len(c.grp.subjects))
		args = append(args, c.bucket, t.phone, c.recorded, flag(c.grp.record != ""), len(c.grp.subjects))
		for _, s := range c.grp.subjects {
			amount := s.price
			if s.kind == 'c' {
				amount = c.cnew
			}
			args = append(args, s.arg(), amount)
		}
		if err := g.scriptsFor(c.grp, c.country).Run(ctx, releaseScript, c.grp.keys(), args...).Err(); err != nil && first == nil {
			first = fmt.Errorf("pumping: release: %w", err)
		}
	}
	return first
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func ms(d time.Duration) int64 { return max(int64(d/time.Millisecond), 0) }
