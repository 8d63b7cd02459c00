// Package pumping implements otp.PumpingGuard on Redis: per-country counts of
// texts sent and codes approved in minute buckets, a quarantine key per
// tripped country, and pub/sub so every replica holds the same quarantines in
// memory.
package pumping

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"smsgw/internal/redisbatch"
	"smsgw/otp"
)

var (
	//go:embed sent.lua
	sentSource string
	//go:embed approved.lua
	approvedSource string

	sentScript     = redis.NewScript(sentSource)
	approvedScript = redis.NewScript(approvedSource)
)

// Modes of the guard.
const (
	// ModeOff does nothing: nothing is counted and nothing is quarantined.
	ModeOff = "off"
	// ModeShadow counts and logs what it would quarantine, but never does:
	// the way to tune the thresholds on real traffic first.
	ModeShadow = "shadow"
	// ModeEnforce quarantines.
	ModeEnforce = "enforce"
)

// bucket is the width of one counter. A window is a whole number of buckets,
// so it slides a minute at a time.
const bucket = time.Minute

// refreshEvery reloads the quarantines from Redis in case a message was lost.
const refreshEvery = 10 * time.Second

// gatherFor is how long, while Run runs, a replica gathers counts in memory
// before writing them: a flood of texts costs Redis one call per country per
// period instead of one per text, and the guard reacts at most this late.
const gatherFor = 50 * time.Millisecond

// Config is the [pumping] section of the configuration.
type Config struct {
	Mode string
	// MinSends is how many texts a window must hold before the ratio counts:
	// a quiet country with one unverified text is not pumping.
	MinSends int
	// MinApprovalRatio is the share of texts whose code must be approved; a
	// window under it trips the guard.
	MinApprovalRatio float64
	Window           time.Duration
	Quarantine       time.Duration
}

// Validate names the first bad key.
func (c Config) Validate() error {
	switch c.Mode {
	case ModeOff, ModeShadow, ModeEnforce:
	default:
		return fmt.Errorf("pumping.mode: want \"off\", \"shadow\" or \"enforce\", got %q", c.Mode)
	}
	if c.MinSends < 1 {
		return fmt.Errorf("pumping.min_sends: must be at least 1, got %d", c.MinSends)
	}
	if math.IsNaN(c.MinApprovalRatio) || c.MinApprovalRatio < 0 || c.MinApprovalRatio > 1 {
		return fmt.Errorf("pumping.min_approval_ratio: want 0 to 1, got %v", c.MinApprovalRatio)
	}
	if c.Window < bucket || c.Window%bucket != 0 {
		return fmt.Errorf("pumping.window: want a whole number of minutes (counts are kept per minute), got %s", c.Window)
	}
	if c.Quarantine < time.Second {
		return fmt.Errorf("pumping.quarantine: must be at least 1s, got %s", c.Quarantine)
	}
	return nil
}

// Scripts runs Redis scripts; a *redisbatch.Batcher shares round trips
// between concurrent calls.
type Scripts interface {
	Run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd
}

// Guard is an otp.PumpingGuard. Its keys, like the limiter's, expect a single
// Redis primary: SCAN and pub/sub would not span a cluster.
type Guard struct {
	rdb     redis.UniversalClient
	prefix  string
	scripts Scripts
	cfg     Config
	log     *slog.Logger

	trips *prometheus.CounterVec

	// held maps countries to what this replica knows of their quarantine. It
	// is replaced, never changed, so Quarantined reads it without a lock; mu
	// orders the writers.
	mu   sync.Mutex
	held atomic.Pointer[map[string]hold]

	// now replaces Redis TIME for the buckets; only tests set it.
	now func() time.Time
	// refresh is how often Run reloads from Redis; tests shorten it.
	refresh time.Duration
	// reloads counts the reloads done, so tests know one has happened.
	reloads atomic.Int64

	// While gathering (Run is running), Sent and Approved only count here.
	gathering atomic.Bool
	pmu       sync.Mutex
	pending   map[tally]int64
}

// tally is a country's sends (approved false) or approvals, as gathered.
type tally struct {
	country  string
	approved bool
}

// hold is a country's local state. A lift leaves a zero until, so that a
// reload which read Redis before the lift cannot bring the country back.
type hold struct {
	until time.Time // local monotonic time; zero when lifted
	at    time.Time // when this replica learnt it
}

var _ otp.PumpingGuard = (*Guard)(nil)

// New returns a Guard whose keys and channel start with prefix (e.g.
// "smsgw:"). cfg must be valid; a mode it does not know means off. Counting
// goes through scripts; nil gives it a batcher of its own. Metrics are
// registered on reg unless it is nil.
func New(rdb redis.UniversalClient, prefix string, scripts Scripts, cfg Config, log *slog.Logger, reg prometheus.Registerer) *Guard {
	if scripts == nil {
		scripts = redisbatch.New(rdb, redisbatch.Options{})
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Mode != ModeShadow && cfg.Mode != ModeEnforce {
		cfg.Mode = ModeOff
	}
	g := &Guard{
		rdb: rdb, prefix: prefix, scripts: scripts, cfg: cfg, log: log, refresh: refreshEvery,
		trips: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "smsgw_pumping_trips_total",
			Help: "Countries that tripped the SMS pumping guard; in shadow mode, that would have.",
		}, []string{"country", "mode"}),
	}
	g.held.Store(&map[string]hold{})
	g.pending = map[tally]int64{}
	if reg != nil {
		reg.MustRegister(g.trips, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "smsgw_pumping_quarantined_countries",
			Help: "Countries this replica holds texts back for.",
		}, func() float64 { return float64(len(g.local())) }))
	}
	return g
}

func (g *Guard) countsKey(country string) string { return g.prefix + "pumping:n:" + country }
func (g *Guard) holdKey(country string) string   { return g.prefix + "pumping:q:" + country }
func (g *Guard) shadowKey(country string) string { return g.prefix + "pumping:shadow:" + country }
func (g *Guard) channel() string                 { return g.prefix + "pumping:events" }

// country names the numbers without a region too: they share "ZZ", CLDR's
// unknown region, rather than escape the guard.
func country(c string) string {
	if c == "" {
		return "ZZ"
	}
	return c
}

func ms(d time.Duration) int64 { return max(int64(d/time.Millisecond), 1) }

// clock is the scripts' now: "" for Redis TIME, so replicas agree on buckets.
func (g *Guard) clock() any {
	if g.now != nil {
		return g.now().UnixMilli()
	}
	return ""
}

// Quarantined answers from memory: a lookup in a map that changes only when a
// quarantine starts or ends.
func (g *Guard) Quarantined(c string) (time.Duration, bool) {
	if g.cfg.Mode != ModeEnforce {
		return 0, false
	}
	h, ok := (*g.held.Load())[country(c)]
	if !ok || h.until.IsZero() {
		return 0, false
	}
	left := time.Until(h.until)
	if left <= 0 {
		return 0, false
	}
	return left, true
}

// local lists the countries this replica holds texts back for, sorted.
func (g *Guard) local() []string {
	var out []string
	now := time.Now()
	for c, h := range *g.held.Load() {
		if h.until.After(now) {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}

// Sent counts a text and, in the same script, trips the country when its
// window is bad. The replica that trips it tells the others.
func (g *Guard) Sent(ctx context.Context, c string) error {
	return g.count(ctx, tally{country: country(c)})
}

// count writes a tally at once, or gathers it while Run runs.
func (g *Guard) count(ctx context.Context, t tally) error {
	if g.cfg.Mode == ModeOff {
		return nil
	}
	if g.gathering.Load() {
		g.pmu.Lock()
		g.pending[t]++
		g.pmu.Unlock()
		return nil
	}
	if t.approved {
		return g.writeApprovals(ctx, t.country, 1)
	}
	return g.writeSends(ctx, t.country, 1)
}

// flush writes what was gathered.
func (g *Guard) flush(ctx context.Context) {
	g.pmu.Lock()
	pending := g.pending
	g.pending = make(map[tally]int64, len(pending))
	g.pmu.Unlock()
	for t, n := range pending {
		var err error
		if t.approved {
			err = g.writeApprovals(ctx, t.country, n)
		} else {
			err = g.writeSends(ctx, t.country, n)
		}
		if err != nil {
			g.log.Warn("pumping: counts not written", "country", t.country, "approved", t.approved, "n", n, "err", err)
		}
	}
}

// writeSends counts n texts to country c and trips the guard when due.
func (g *Guard) writeSends(ctx context.Context, c string, n int64) error {
	hk := g.holdKey(c)
	if g.cfg.Mode == ModeShadow {
		hk = g.shadowKey(c)
	}
	vals, err := g.scripts.Run(ctx, sentScript, []string{g.countsKey(c), hk},
		g.clock(), ms(bucket), ms(g.cfg.Window), g.cfg.MinSends,
		strconv.FormatFloat(g.cfg.MinApprovalRatio, 'g', -1, 64), ms(g.cfg.Quarantine), n).Int64Slice()
	if err != nil {
		return fmt.Errorf("pumping: sent: %w", err)
	}
	if len(vals) != 4 {
		return fmt.Errorf("pumping: sent: unexpected reply %v", vals)
	}
	state, sends, approvals, left := vals[0], vals[1], vals[2], time.Duration(vals[3])*time.Millisecond
	if vals[3] < 0 {
		left = noExpiry
	}
	switch {
	case state == 1 && g.cfg.Mode == ModeShadow:
		g.trips.WithLabelValues(c, g.cfg.Mode).Inc()
		g.log.Warn("pumping: country would be quarantined (shadow mode)", "country", c,
			"sends", sends, "approvals", approvals, "window", g.cfg.Window, "quarantine", g.cfg.Quarantine)
	case state == 1:
		g.trips.WithLabelValues(c, g.cfg.Mode).Inc()
		g.set(c, time.Now().Add(left))
		g.log.Warn("pumping: country quarantined", "country", c,
			"sends", sends, "approvals", approvals, "window", g.cfg.Window, "quarantine", g.cfg.Quarantine)
		// The quarantine holds in Redis already; a lost message only delays
		// the others until their next reload, so it does not fail the send.
		if err := g.rdb.Publish(ctx, g.channel(), "trip "+c+" "+strconv.FormatInt(ms(left), 10)).Err(); err != nil {
			g.log.Error("pumping: announcing a quarantine", "country", c, "err", err)
		}
	case state == 2 && g.cfg.Mode == ModeEnforce:
		// Another replica tripped it and this one may not have heard yet.
		if _, ok := g.Quarantined(c); !ok {
			g.set(c, time.Now().Add(g.remaining(left)))
		}
	}
	return nil
}

// noExpiry is go-redis's PTTL for a key without a TTL.
const noExpiry = time.Duration(-1)

// remaining reads a PTTL: a quarantine written without a TTL (by hand) holds
// until it is lifted, which the reloads keep extending a full quarantine at a
// time.
func (g *Guard) remaining(pttl time.Duration) time.Duration {
	if pttl == noExpiry {
		return g.cfg.Quarantine
	}
	return pttl
}

// Approved counts an approved code.
func (g *Guard) Approved(ctx context.Context, c string) error {
	return g.count(ctx, tally{country: country(c), approved: true})
}

func (g *Guard) writeApprovals(ctx context.Context, c string, n int64) error {
	err := g.scripts.Run(ctx, approvedScript, []string{g.countsKey(c)},
		g.clock(), ms(bucket), ms(g.cfg.Window), n).Err()
	if err != nil {
		return fmt.Errorf("pumping: approved: %w", err)
	}
	return nil
}

// set records a country's quarantine, or its lift with a zero until.
func (g *Guard) set(c string, until time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	old := *g.held.Load()
	m := make(map[string]hold, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[c] = hold{until: until, at: time.Now()}
	g.held.Store(&m)
}

// replace installs a reload that started reading Redis at start, keeping what
// this replica learnt since: Redis may have been read before it happened.
func (g *Guard) replace(fresh map[string]time.Time, start time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := make(map[string]hold, len(fresh))
	for c, until := range fresh {
		m[c] = hold{until: until, at: start}
	}
	for c, h := range *g.held.Load() {
		if h.at.After(start) {
			m[c] = h
		}
	}
	g.held.Store(&m)
}

// Run keeps the local quarantines in step with Redis until ctx ends: it
// applies the other replicas' messages, and reloads everything on every
// (re)subscription, since messages sent while disconnected are lost, and
// every refresh period in case one was lost anyway. Only enforce mode needs
// it; the other modes wait for ctx.
func (g *Guard) Run(ctx context.Context) error {
	if g.cfg.Mode == ModeOff {
		<-ctx.Done()
		return nil
	}
	g.gathering.Store(true)
	defer func() {
		g.gathering.Store(false)
		g.flush(context.WithoutCancel(ctx))
	}()
	gather := time.NewTicker(gatherFor)
	defer gather.Stop()
	if g.cfg.Mode != ModeEnforce {
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-gather.C:
				g.flush(ctx)
			}
		}
	}
	ps := g.rdb.Subscribe(ctx, g.channel())
	defer ps.Close()
	msgs := ps.ChannelWithSubscriptions()
	tick := time.NewTicker(g.refresh)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-gather.C:
			g.flush(ctx)
		case <-tick.C:
			g.reload(ctx)
		case m, ok := <-msgs:
			if !ok {
				return errors.New("pumping: subscription closed")
			}
			switch m := m.(type) {
			case *redis.Subscription:
				if m.Kind == "subscribe" {
					g.reload(ctx)
				}
			case *redis.Message:
				g.apply(m.Payload)
			}
		}
	}
}

// apply handles "trip <country> <ms left>" and "lift <country>".
func (g *Guard) apply(payload string) {
	f := strings.Fields(payload)
	switch {
	case len(f) == 3 && f[0] == "trip":
		left, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			break
		}
		g.set(f[1], time.Now().Add(time.Duration(left)*time.Millisecond))
		g.log.Debug("pumping: quarantine announced", "country", f[1])
		return
	case len(f) == 2 && f[0] == "lift":
		g.set(f[1], time.Time{})
		return
	}
	g.log.Warn("pumping: unknown message", "channel", g.channel(), "payload", payload)
}

// reload replaces the local quarantines with Redis's.
func (g *Guard) reload(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	fresh := map[string]time.Time{}
	err := g.scan(rctx, func(p redis.Pipeliner, c, key string) func() {
		ttl := p.PTTL(rctx, key)
		return func() {
			if d := ttl.Val(); d > 0 || d == noExpiry {
				fresh[c] = time.Now().Add(g.remaining(d))
			}
		}
	})
	if err != nil {
		if ctx.Err() == nil { // not shutting down
			g.log.Error("pumping: reloading quarantines", "err", err)
		}
		return
	}
	g.replace(fresh, start)
	g.reloads.Add(1)
}

// scan calls each for every quarantine key, a SCAN page at a time, queueing
// its commands in one pipeline per page and running what it returns after.
func (g *Guard) scan(ctx context.Context, each func(p redis.Pipeliner, country, key string) func()) error {
	pattern := globEscape(g.prefix+"pumping:q:") + "*"
	var cursor uint64
	for {
		keys, next, err := g.rdb.Scan(ctx, cursor, pattern, 1000).Result()
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			var after []func()
			p := g.rdb.Pipeline()
			for _, k := range keys {
				after = append(after, each(p, strings.TrimPrefix(k, g.prefix+"pumping:q:"), k))
			}
			if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
				return err
			}
			for _, f := range after {
				f()
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// globEscape quotes the characters SCAN's MATCH would read as a pattern.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// List reads the quarantines from Redis, the truth every replica follows,
// sorted by country.
func (g *Guard) List(ctx context.Context) ([]otp.Quarantine, error) {
	var out []otp.Quarantine
	err := g.scan(ctx, func(p redis.Pipeliner, c, key string) func() {
		fields := p.HGetAll(ctx, key)
		ttl := p.PTTL(ctx, key)
		return func() {
			d := ttl.Val()
			if d <= 0 && d != noExpiry {
				return // gone since the SCAN
			}
			q := otp.Quarantine{Country: c, Remaining: g.remaining(d)}
			q.Sends, _ = strconv.Atoi(fields.Val()["s"])
			q.Approvals, _ = strconv.Atoi(fields.Val()["a"])
			out = append(out, q)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("pumping: list: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Country < out[j].Country })
	return out, nil
}

// Lift ends a country's quarantine (and its shadow marker) on every replica
// at once. Its counts were cleared when it tripped, so it does not trip again
// on the same evidence.
func (g *Guard) Lift(ctx context.Context, c string) error {
	c = country(c)
	if err := g.rdb.Del(ctx, g.holdKey(c), g.shadowKey(c)).Err(); err != nil {
		return fmt.Errorf("pumping: lift: %w", err)
	}
	g.set(c, time.Time{})
	if err := g.rdb.Publish(ctx, g.channel(), "lift "+c).Err(); err != nil {
		return fmt.Errorf("pumping: lift: announcing it: %w", err)
	}
	g.log.Info("pumping: quarantine lifted", "country", c)
	return nil
}
