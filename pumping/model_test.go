package pumping

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/internal/testenv"
	"smsgw/otp"
)

// TestMatchesReferenceModel drives decide.lua, approve.lua and release.lua
// on real Redis and the reference model (model.go) with the same random
// steps (sends, approvals, releases, clock steps over many numbers,
// ranges, countries, operators and caller networks) and requires, after
// every step, the same replies and the same stored fields in every key
// the step touched. It runs in both layouts: one call per send (one
// primary) and one call per hash tag (as on Redis Cluster, with the
// destination told the caller's signal, or asking again). The seed is
// printed on failure; SMSGW_MODEL_SEED replays one, SMSGW_MODEL_STEPS
// runs more steps.
func TestMatchesReferenceModel(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SMSGW_MODEL_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	steps := 10_000
	if s := os.Getenv("SMSGW_MODEL_STEPS"); s != "" {
		steps, _ = strconv.Atoi(s)
	}
	// Four runs per layout, each with a configuration of its own, at
	// once: a step waits mostly on its round trip.
	for _, cluster := range []bool{false, true} {
		for run := range modelRuns {
			t.Run(fmt.Sprintf("cluster=%v/run=%d", cluster, run), func(t *testing.T) {
				t.Parallel()
				rdb, prefix := testenv.Redis(t)
				h := runModelSequence(t, rdb, prefix, cluster, seed, run, steps/modelRuns, packageScripts(), nil)
				if t.Failed() {
					t.Fatalf("seed %d (SMSGW_MODEL_SEED=%d replays it)", seed, seed)
				}
				h.checkAll()
				h.cleanup()
				if t.Failed() {
					t.Fatalf("seed %d: the final keyspace differs", seed)
				}
				h.logCoverage()
			})
		}
	}
}

// modelRuns is how many runs per layout share TestMatchesReferenceModel's
// steps.
const modelRuns = 4

// runModelSequence runs run number run of seed in one layout: a
// configuration and steps steps, both drawn from the seed, through the
// model and scripts. It returns at the first difference (reported to t),
// or when stop (when not nil) is set, another run having found one.
func runModelSequence(t testing.TB, rdb *redis.Client, prefix string, cluster bool, seed uint64, run, steps int,
	scripts modelScripts, stop *atomic.Bool) *modelHarness {
	rng := rand.New(rand.NewPCG(seed, uint64(run)<<1|b2u(cluster)))
	cfg := randomModelConfig(rng)
	if run == 1 && cfg.Spend.Hour == 0 {
		// One run of each layout holds an hour's spend budget: the edge of
		// it (spendEdge) needs one, and a random configuration has one in
		// a third of the runs only.
		cfg.Spend = modelSpend(cfg.Spend.Day)
	}
	h := newModelHarnessWith(t, rdb, prefix, cluster, cfg, scripts)
	gen := newModelGen(rng, cfg, h)
	for range steps {
		h.step(gen.next())
		if t.Failed() || (stop != nil && stop.Load()) {
			return h
		}
	}
	h.flush()
	return h
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// randomModelConfig is a valid configuration from the ranges the rules
// are meant for, small windows to make them move.
func randomModelConfig(rng *rand.Rand) Config {
	cfg := DefaultConfig()
	pick := func(d ...time.Duration) time.Duration { return d[rng.IntN(len(d))] }
	cfg.Window = pick(time.Hour, 2*time.Hour, 3*time.Hour, 24*time.Hour)
	cfg.Ratio = []float64{1, 0.5, 2, 1.5}[rng.IntN(4)]
	cfg.HourFactor = []float64{4, 1, 2.5}[rng.IntN(3)]
	cfg.RestrictFor = pick(time.Hour, 10*time.Minute, 0, 3*time.Hour)
	cfg.ProbeEvery = pick(10*time.Minute, 0, time.Minute)
	cfg.ReturningFor = pick(30*24*time.Hour, 0, 24*time.Hour)
	cfg.ChallengeBudget = rng.IntN(2) == 0
	if rng.IntN(5) == 0 {
		cfg.Mode = ModeShadow
	}
	if rng.IntN(3) == 0 {
		// No ranges and a small operator floor: the steps' numbers share a
		// few blocks, whose ranges would otherwise refuse before an
		// operator's or a country's own budgets and horizons are reached.
		for _, r := range []string{RuleRange100, RuleRange1k, RuleRange10k, RuleRange100k} {
			cfg.Floors[r] = 0
		}
		cfg.Floors[RuleOperator] = 2
	}
	if rng.IntN(2) == 0 {
		cfg.Spend = Spend{Default: 0.05, Prices: map[string]float64{"NG": 0.2}, Hour: []float64{0, 0.6, 0.6}[rng.IntN(3)], Day: 1.5}
	}
	return cfg
}

// modelSpend is a spend budget of an hour (and of the window when day is
// not 0): a dozen texts an hour, NG's four times the price.
func modelSpend(day float64) Spend {
	return Spend{Default: 0.05, Prices: map[string]float64{"NG": 0.2}, Hour: 0.6, Day: day}
}

// The numbers the steps text: runs of a few blocks under operators' ranges
// of several countries (NG's Glo and MTN, DE's O2 and T-Mobile, GB's Three,
// JE and GG sharing +44 and an operator's name), and numbers no operator
// data covers (US).
var modelPrefixes = []struct {
	prefix string
	digits int // of the whole E.164 number
}{{"+234805123", 13}, {"+234803123", 13}, {"+49176123", 13}, {"+49151123", 13}, {"+447400", 12}, {"+447797", 12},
	{"+447911", 12}, {"+1415555", 11}, {"+3712123", 11}}

// modelPhones are the numbers, parsed once.
var modelPhones = sync.OnceValue(func() []otp.Phone {
	var out []otp.Phone
	for _, pre := range modelPrefixes {
		for _, tail := range []int{0, 1, 7, 42, 99, 100, 357, 1000, 4242, 9999} {
			raw := fmt.Sprintf("%s%0*d", pre.prefix, pre.digits+1-len(pre.prefix), tail)
			p, err := otp.ParsePhone(raw, "")
			if err != nil {
				panic(raw + ": " + err.Error())
			}
			out = append(out, p)
		}
	}
	return out
})

// The callers: IPv4 addresses sharing /24s and /16s, IPv6 sharing /64s up
// to /32s, and none (no caller group).
var modelIPs = []string{"198.51.100.1", "198.51.100.2", "198.51.7.9", "203.0.113.5", "203.0.114.5",
	"2001:db8:1:1::1", "2001:db8:1:1::2", "2001:db8:1:2::1", "2001:db8:2::1", "2001:db9::1", ""}

// modelStep is one step of a sequence.
type modelStep struct {
	kind   byte // 's' send, 'a' approve, 'r' release, 't' clock
	phone  int
	ip     int
	bypass bool
	sig    int   // the signal a Cluster call tells the destination (modelHarness.send)
	n      int64 // ms for 't'; which reservation for 'r'
}

func (s modelStep) String() string {
	switch s.kind {
	case 's':
		b := ""
		if s.bypass {
			b = " bypass"
		}
		return fmt.Sprintf("send phone %d from ip %d%s", s.phone, s.ip, b)
	case 'a':
		return fmt.Sprintf("approve phone %d", s.phone)
	case 'r':
		return fmt.Sprintf("release reservation %d", s.n)
	}
	return fmt.Sprintf("clock +%dms", s.n)
}

func randomModelStep(rng *rand.Rand) modelStep {
	s := modelStep{phone: rng.IntN(len(modelPrefixes) * 10), ip: rng.IntN(len(modelIPs)), sig: rng.IntN(7)}
	switch r := rng.IntN(100); {
	case r < 60:
		s.kind = 's'
		s.bypass = rng.IntN(12) == 0
	case r < 80:
		s.kind = 'a'
	case r < 87:
		s.kind, s.n = 'r', int64(rng.IntN(1000))
	default:
		s.kind = 't'
		switch rng.IntN(8) {
		case 0:
			s.n = int64(rng.IntN(1000))
		case 1, 2:
			s.n = int64(rng.IntN(60_000))
		case 3, 4:
			s.n = int64(rng.IntN(30 * 60_000))
		case 5:
			s.n = int64(3_600_000 + rng.IntN(120_000) - 60_000)
		case 6:
			s.n = int64(rng.IntN(6 * 3_600_000))
		default:
			s.n = int64(rng.IntN(3 * 86_400_000))
		}
	}
	return s
}

// logCoverage says what the run exercised, so a change that makes the
// steps miss a branch shows.
func (h *modelHarness) logCoverage() {
	keys := slices.Sorted(maps.Keys(h.seen))
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%d", k, h.seen[k])
	}
	h.t.Logf("run %s (window %v, ratio %g, hour factor %g, restrict %v, probe %v):%s", h.prefix, h.cfg.Window, h.cfg.Ratio, h.cfg.HourFactor,
		h.cfg.RestrictFor, h.cfg.ProbeEvery, b.String())
}

// FuzzMatchesReferenceModel is TestMatchesReferenceModel over sequences
// the fuzzer makes: the first byte picks the configuration and the layout,
// then every four bytes are a step (modelStepFromBytes).
func FuzzMatchesReferenceModel(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 1, 0})
	f.Add([]byte{1, 0, 0, 3, 12, 0, 1, 0, 3, 81, 4, 0, 90, 0, 0, 10, 0, 3, 5, 0, 70, 0, 0, 0})
	f.Add([]byte{2, 1, 20, 4, 1, 21, 4, 1, 22, 4, 1, 23, 4, 1, 24, 4, 1, 25, 4, 1, 26, 4, 82, 20, 0, 0})
	rdb, prefix := testenv.Redis(f)
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 1 {
			return
		}
		rng := rand.New(rand.NewPCG(uint64(b[0]>>1), 0))
		h := newModelHarness(t, rdb, fmt.Sprintf("%sf%d:", prefix, n.Add(1)), b[0]&1 == 1, randomModelConfig(rng))
		defer h.cleanup()
		for b = b[1:]; len(b) >= 4 && len(h.history) < 400; b = b[4:] {
			h.step(modelStepFromBytes(b))
		}
		h.flush()
	})
}

// modelClockSteps are the clock steps a fuzzed sequence takes: around a
// bucket's and a window's edges.
var modelClockSteps = []int64{0, 1, 999, 60_000, 600_000, 3_599_999, 3_600_000, 3_600_001, 7_200_000, 86_400_000, 2 * 86_400_000, 40 * 86_400_000}

// modelStepFromBytes reads a step from four bytes: what, which number,
// which caller, and a detail (bypass, the Cluster signal, which
// reservation, how far the clock moves).
func modelStepFromBytes(b []byte) modelStep {
	s := modelStep{phone: int(b[1]) % (len(modelPrefixes) * 10), ip: int(b[2]) % len(modelIPs), sig: int(b[3]) % 7}
	switch r := int(b[0]) % 100; {
	case r < 60:
		s.kind, s.bypass = 's', b[3] >= 240
	case r < 80:
		s.kind = 'a'
	case r < 87:
		s.kind, s.n = 'r', int64(b[3])
	default:
		s.kind, s.n = 't', modelClockSteps[int(b[3])%len(modelClockSteps)]+int64(b[1])*1000
	}
	return s
}

// modelGen draws a run's steps. Uniform random steps (randomModelStep)
// seldom reach the states a rule's edge needs: an operator's ledger of
// networks known abroad with approvals an hour old, a restriction whose
// window budget then fell, a send exactly a window, a bucket or a
// restriction after another. So a run mixes them with episodes, each a
// short plan of steps aimed at one of those states (travellers, trip,
// anniversary, resends), drawn from the same rng. The generator keeps the
// run's clock (the harness starts at modelT0 and moves only by its clock
// steps) and the last sends and approvals, to aim clock steps at their
// anniversaries.
//
// Some comparisons are told apart only at one millisecond or one count,
// with a ledger in a narrow state: a send exactly a probe period after a
// network's probe, a window after a trip, an hour after a ledger's first
// refusal abroad; a renewal's refusals at twice the travellers' average
// hour; an hour's spend landing on its budget. Their episodes (spendEdge,
// probeEdge, heldEdge, abroadClimb) go on in parts (then), each planned
// once the steps before it ran, from the model's state then, and at the
// edge ask the model which candidate send exercises it (hunt,
// modelHarness.edges).
type modelGen struct {
	rng   *rand.Rand
	cfg   Config
	h     *modelHarness // read only: its clock and the model's stored times
	now   int64         // ms, the harness's clock after the queued steps
	queue []modelStep
	marks []modelMark // the last sends and approvals, newest last
	// later are the next parts of a plan, each run once the steps queued
	// before it ran: it reads the model's state then (hunt).
	later []func()
}

// modelMark is a send or an approval the generator made, and when.
type modelMark struct {
	at        int64
	phone, ip int
	approve   bool
}

func newModelGen(rng *rand.Rand, cfg Config, h *modelHarness) *modelGen {
	return &modelGen{rng: rng, cfg: cfg, h: h}
}

// The prefixes of modelPrefixes by what an episode needs of them.
const (
	modelUS = 7 // no operator data
	modelLV = 8
)

// modelOperatorPrefixes are the prefixes with an operator (every one but
// the US), each its own operator; modelCountryPrefixes group them by
// country.
var (
	modelOperatorPrefixes = []int{0, 1, 2, 3, 4, 5, 6, 8}
	modelCountryPrefixes  = [][]int{{0, 1}, {2, 3}, {4}, {5}, {6}, {modelUS}, {modelLV}}
)

func (g *modelGen) next() modelStep {
	for len(g.queue) == 0 {
		// The harness ran every step queued: its clock is the model's.
		g.now = g.h.now
		if len(g.later) > 0 {
			f := g.later[0]
			g.later = g.later[1:]
			f()
			continue
		}
		g.plan()
	}
	s := g.queue[0]
	g.queue = g.queue[1:]
	return s
}

// plan queues the next step or episode.
func (g *modelGen) plan() {
	switch r := g.rng.IntN(100); {
	case r < 26:
		s := randomModelStep(g.rng)
		if s.kind == 't' {
			g.clock(s.n)
			return
		}
		g.add(s)
	case r < 38:
		g.travellers()
	case r < 49:
		g.tripAndFall()
	case r < 55:
		g.anniversary()
	case r < 63:
		g.storedEdge()
	case r < 67:
		g.spendEdge()
	case r < 73:
		g.resends()
	case r < 85:
		g.abroadClimb()
	case r < 90:
		g.probeEdge()
	case r < 94:
		g.pressureEdge()
	default:
		g.heldEdge()
	}
}

// add queues a send or an approval, noting it.
func (g *modelGen) add(s modelStep) {
	g.queue = append(g.queue, s)
	if s.kind == 's' || s.kind == 'a' {
		g.marks = append(g.marks, modelMark{at: g.now, phone: s.phone, ip: s.ip, approve: s.kind == 'a'})
		if len(g.marks) > 64 {
			g.marks = g.marks[len(g.marks)-64:]
		}
	}
}

func (g *modelGen) send(phone, ip int) {
	g.add(modelStep{kind: 's', phone: phone, ip: ip, bypass: g.rng.IntN(20) == 0, sig: g.rng.IntN(7)})
}

func (g *modelGen) approve(phone int) { g.add(modelStep{kind: 'a', phone: phone}) }

func (g *modelGen) clock(n int64) {
	if n < 0 {
		return
	}
	g.now += n
	g.queue = append(g.queue, modelStep{kind: 't', n: n})
}

// jitter is a small clock step, as between a user's send and approval.
func (g *modelGen) jitter() {
	if g.rng.IntN(2) == 0 {
		g.clock(int64(g.rng.IntN(90_000)))
	}
}

// phone is a number of prefix pre, its tail one of ten.
func (g *modelGen) phone(pre int) int { return pre*10 + g.rng.IntN(10) }

// phones are n distinct numbers of the prefixes, spread over their blocks.
func (g *modelGen) phones(pres []int, n int) []int {
	var all []int
	for _, p := range pres {
		for i := range 10 {
			all = append(all, p*10+i)
		}
	}
	g.rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	return all[:min(n, len(all))]
}

// hourish is a clock step past the last hour's approvals, or near it.
func (g *modelGen) hourish() int64 {
	switch g.rng.IntN(5) {
	case 0:
		return int64(3_600_000 + g.rng.IntN(3_600_000))
	case 1:
		return int64(2*3_600_000 + g.rng.IntN(3_600_000))
	case 2:
		return int64(g.rng.IntN(3_600_000))
	case 3:
		return ms(g.cfg.RestrictFor) + int64(g.rng.IntN(3))*1000
	}
	return int64(3_600_000 + g.rng.IntN(120_000) - 60_000)
}

// travellers: a caller network known for real users of another country
// (its approvals to the US or Latvia) sends to an operator's numbers
// abroad: some verify, then an hour or more passes, then more come, some
// not verifying. This is an operator's ledger of networks known abroad
// with approvals older than its last hour (its travellers' budget), and
// the country's, tripping after three refusals and renewed.
func (g *modelGen) travellers() {
	ip := g.rng.IntN(len(modelIPs) - 1) // not the empty one: it has no networks
	home := []int{modelUS, modelLV}[g.rng.IntN(2)]
	// The network's approvals elsewhere, again in each round: a window of
	// an hour forgets them.
	warm := func() {
		for range 3 + g.rng.IntN(2) {
			p := g.phone(home)
			g.send(p, ip)
			g.approve(p)
		}
	}
	warm()
	target := modelOperatorPrefixes[g.rng.IntN(len(modelOperatorPrefixes)-1)] // not LV
	if g.rng.IntN(3) == 0 {
		target = modelOperatorPrefixes[g.rng.IntN(len(modelOperatorPrefixes))]
	}
	if g.rng.IntN(2) == 0 {
		g.renewal(target, ip)
		return
	}
	// Travellers verify; an attack through the same networks does not.
	travellers := g.rng.IntN(3) > 0
	for _, p := range g.phones([]int{target}, 1+g.rng.IntN(3)) {
		g.send(p, ip)
		g.jitter()
		if travellers && g.rng.IntN(4) > 0 {
			g.approve(p)
		}
	}
	// Rounds an hour or so apart: sends nobody verifies trip the ledger
	// within the hour; the first few verify late (room again while it is
	// restricted: renewed or not); in the next round it is renewed or
	// lapses.
	for range 1 + g.rng.IntN(3) {
		g.clock(g.hourish())
		if g.rng.IntN(2) == 0 {
			warm()
		}
		ps := g.phones([]int{target}, 2+g.rng.IntN(9))
		late := 3 + g.rng.IntN(4) // when the first, admitted, verifies
		for i, p := range ps {
			g.send(p, ip)
			if travellers && i == late {
				g.approve(ps[0])
			}
			if g.rng.IntN(5) == 0 {
				g.clock(int64(g.rng.IntN(300_000)))
			}
		}
	}
}

// tripAndFall: a country (or an operator) earns room from approvals in
// the hour, then a burst of numbers nobody verifies restricts it; then an
// hour or a restriction passes and more come: the window's budget the trip
// held, after the hour's term has fallen.
func (g *modelGen) tripAndFall() {
	pres := modelCountryPrefixes[g.rng.IntN(len(modelCountryPrefixes))]
	ip := len(modelIPs) - 1 // no caller networks: no sign, no network budget
	if g.rng.IntN(3) == 0 {
		ip = g.rng.IntN(len(modelIPs))
	}
	for _, p := range g.phones(pres, 1+g.rng.IntN(3)) {
		g.send(p, ip)
		g.jitter()
		g.approve(p)
	}
	for _, p := range g.phones(pres, 3+g.rng.IntN(10)) {
		g.send(p, ip)
		if g.rng.IntN(3) == 0 {
			g.clock(int64(g.rng.IntN(120_000)))
		}
	}
	g.clock(g.hourish())
	for _, p := range g.phones(pres, 2+g.rng.IntN(6)) {
		g.send(p, ip)
		if g.rng.IntN(5) == 0 {
			g.approve(p)
		}
		if g.rng.IntN(3) == 0 {
			g.clock(int64(g.rng.IntN(600_000)))
		}
	}
}

// anniversary moves the clock to an edge of an earlier send or approval:
// a bucket, a window, a restriction, a probe period or a day after it (or
// to the next bucket's edge), a millisecond either side or on it, and
// sends there again: the comparisons of time (<, <=) are told apart only
// there.
func (g *modelGen) anniversary() {
	if len(g.marks) == 0 {
		g.send(g.rng.IntN(len(modelPrefixes)*10), g.rng.IntN(len(modelIPs)))
		return
	}
	m := g.marks[len(g.marks)-1-g.rng.IntN(min(len(g.marks), 16))]
	hour := int64(3_600_000)
	deltas := []int64{hour, ms(g.cfg.Window), ms(g.cfg.RestrictFor), ms(g.cfg.ProbeEvery), 86_400_000}
	target := m.at + deltas[g.rng.IntN(len(deltas))]
	if g.rng.IntN(4) == 0 {
		target = (g.now/hour + 1) * hour // the next bucket's edge
	}
	target += []int64{-1, 0, 0, 1, -500}[g.rng.IntN(5)]
	g.clock(target - g.now)
	phone, ip := m.phone, m.ip
	if g.rng.IntN(3) == 0 {
		phone = g.phone(phone / 10)
	}
	g.send(phone, ip)
	if g.rng.IntN(3) == 0 {
		g.approve(phone)
	}
}

// resends: one number texted again and again, from one caller or several,
// approved in between or not, some sends released.
func (g *modelGen) resends() {
	p, ip := g.rng.IntN(len(modelPrefixes)*10), g.rng.IntN(len(modelIPs))
	for range 2 + g.rng.IntN(5) {
		if g.rng.IntN(3) == 0 {
			ip = g.rng.IntN(len(modelIPs))
		}
		g.send(p, ip)
		switch g.rng.IntN(5) {
		case 0:
			g.approve(p)
		case 1:
			g.queue = append(g.queue, modelStep{kind: 'r', n: int64(g.rng.IntN(1000))})
		case 2:
			g.clock(int64(g.rng.IntN(1_800_000)))
		}
	}
}

// storedEdge moves the clock to an edge of a time the model stored: a
// ledger's first refusal abroad (ot) an hour on, a trip (rs) a window on,
// a restriction's end (rx), a network's probe (pr) a probe period on, a
// key's expiry (x) less keep or the learned keep plus a bucket (where the
// scripts refresh it), a millisecond either side or on it; then sends to
// the key's country or from its network, as an attack or a user there
// would go on doing.
func (g *modelGen) storedEdge() {
	hour, window := int64(3_600_000), ms(g.cfg.Window)
	type edge struct {
		at   int64
		kind int
		key  string
	}
	var edges []edge
	add := func(k string, f map[string]string, kind int, field string, d int64) {
		if v, ok := f[field]; ok {
			if x, err := strconv.ParseFloat(v, 64); err == nil && int64(x)+d > g.now {
				edges = append(edges, edge{int64(x) + d, kind, k})
			}
		}
	}
	for k, f := range g.h.store.hashes {
		add(k, f, 0, fieldAbroadRefusedSince, hour)
		add(k, f, 1, fieldRestrictedSince, window)
		add(k, f, 2, fieldRestrictedUntil, 0)
		if p := ms(g.cfg.ProbeEvery); p > 0 {
			add(k, f, 3, fieldProbed, p)
		}
		add(k, f, 4, fieldExpires, -2*window+hour)
		add(k, f, 5, fieldExpires, -15*window+hour)
	}
	if len(edges) == 0 {
		g.anniversary()
		return
	}
	// A kind of edge first, then one of its nearest: the nearest of all
	// would nearly always be a bucket's.
	kinds := map[int]bool{}
	for _, e := range edges {
		kinds[e.kind] = true
	}
	kind := slices.Sorted(maps.Keys(kinds))[g.rng.IntN(len(kinds))]
	edges = slices.DeleteFunc(edges, func(e edge) bool { return e.kind != kind })
	slices.SortFunc(edges, func(a, b edge) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		return strings.Compare(a.key, b.key)
	})
	e := edges[g.rng.IntN(min(len(edges), 4))]
	g.clock(e.at + []int64{-1, 0, 0, 1, -500}[g.rng.IntN(5)] - g.now)
	phones, ips := modelKeyPhones(e.key), modelKeyIPs(e.key)
	if kind == 1 && len(phones) > 0 {
		// A window after a trip the budget it held ends: an attack at
		// that instant, new numbers nobody verifies, is refused from the
		// budget the window earned without it.
		g.rng.Shuffle(len(phones), func(i, j int) { phones[i], phones[j] = phones[j], phones[i] })
		for _, p := range phones[:min(len(phones), 6+g.rng.IntN(10))] {
			g.send(p, len(modelIPs)-1)
		}
		return
	}
	// An attack goes on at the edge: several sends at once, new numbers
	// mostly (a restriction, a budget, a probe decide those).
	for range 2 + g.rng.IntN(6) {
		phone, ip := g.rng.IntN(len(modelPrefixes)*10), g.rng.IntN(len(modelIPs))
		if len(phones) > 0 {
			phone = phones[g.rng.IntN(len(phones))]
		}
		if len(ips) > 0 {
			ip = ips[g.rng.IntN(len(ips))]
		}
		if (len(ips) == 0 || len(phones) == 0) && g.rng.IntN(3) > 0 {
			// The caller, or the number, as the last steps had it.
			for _, m := range slices.Backward(g.marks) {
				if len(phones) > 0 && slices.Contains(phones, m.phone) {
					ip = m.ip
					break
				}
				if len(ips) > 0 && slices.Contains(ips, m.ip) {
					phone = m.phone
					break
				}
			}
		}
		if len(ips) == 0 && g.rng.IntN(3) == 0 {
			ip = len(modelIPs) - 1 // no caller: unsigned
		}
		g.send(phone, ip)
		if g.rng.IntN(4) == 0 {
			g.approve(phone)
		}
	}
}

// modelKeyPhones are the numbers a destination key ({d:<country>}) is
// about; modelKeyIPs the callers a network key ({n:<widest>}) is.
func modelKeyPhones(key string) []int {
	_, rest, ok := strings.Cut(key, "pump:{d:")
	if !ok {
		return nil
	}
	country, _, _ := strings.Cut(rest, "}")
	var out []int
	for i, p := range modelPhones() {
		if countryOf(p) == country {
			out = append(out, i)
		}
	}
	return out
}

func modelKeyIPs(key string) []int {
	_, rest, ok := strings.Cut(key, "pump:{n:")
	if !ok {
		return nil
	}
	widest, _, _ := strings.Cut(rest, "}")
	var out []int
	for i, s := range modelIPs {
		if a, err := netip.ParseAddr(s); err == nil && wideKey(a) == widest {
			out = append(out, i)
		}
	}
	return out
}

// spendBurst: after a quiet hour, a burst of sends with a solved
// challenge (which pass every rule but the spend ledger) at one instant,
// so the hour's spend meets its budget exactly (its previous bucket
// empty, nothing of it weighs in).
func (g *modelGen) spendBurst() {
	g.clock(2*3_600_000 + int64(g.rng.IntN(3_600_000)))
	for range 12 + g.rng.IntN(10) {
		g.add(modelStep{kind: 's', phone: g.rng.IntN(len(modelPrefixes) * 10), ip: g.rng.IntN(len(modelIPs)), bypass: true, sig: g.rng.IntN(7)})
	}
}

// renewal: within minutes, a few travellers to an operator verify at once
// (room), then sends nobody verifies trip its ledger of networks known
// abroad, then some of them verify late (room again while it is
// restricted), then more come: the restriction is renewed or not by the
// refusals of the hour against twice the travellers' average hour.
func (g *modelGen) renewal(target, ip int) {
	ps := g.phones([]int{target}, 10)
	k := g.rng.IntN(3)
	for _, p := range ps[:k] {
		g.send(p, ip)
		g.approve(p)
	}
	// Seconds apart: a renewal at the trip's instant writes the same end.
	tick := func() { g.clock(1 + int64(g.rng.IntN(120_000))) }
	m := k + 3 + g.rng.IntN(3)
	for _, p := range ps[k:m] {
		g.send(p, ip)
		tick()
	}
	for _, p := range ps[k : k+1+g.rng.IntN(2)] {
		g.approve(p)
	}
	for _, p := range ps[m:] {
		g.send(p, ip)
		tick()
	}
}

// then queues f to run once the steps queued so far ran.
func (g *modelGen) then(f func()) { g.later = append(g.later, f) }

// hunt queues the first of n candidate sends (cand) that exercises one of
// the edges named (modelHarness.edges), and says whether one did. A
// comparison of the rules is told apart from its mutant only at its edge
// (a send a probe period after the probe, a count equal to a threshold),
// which random steps seldom meet exactly: the model, asked before each
// candidate, says which one meets it now.
func (g *modelGen) hunt(n int, cand func() modelStep, want ...string) bool {
	tried := map[modelStep]bool{}
	for range n {
		s := cand()
		k := s
		k.sig = 0 // the model is asked on one primary: no signal told
		if tried[k] {
			continue
		}
		tried[k] = true
		for _, e := range g.h.edges(s) {
			if slices.Contains(want, e) {
				g.add(s)
				return true
			}
		}
	}
	return false
}

// storedTime is a time field of key in the model's store.
func (g *modelGen) storedTime(key, field string) (int64, bool) {
	v, ok := g.h.store.hashes[key][field]
	if !ok {
		return 0, false
	}
	x, err := strconv.ParseFloat(v, 64)
	return int64(x), err == nil
}

// anyPhone and anyIP are a number and a caller of the steps' own.
func (g *modelGen) anyPhone() int { return g.rng.IntN(len(modelPrefixes) * 10) }
func (g *modelGen) anyIP() int    { return g.rng.IntN(len(modelIPs)) }

// spendEdge: after a quiet hour, sends the spend ledger counts at one
// instant, one at a time, until one lands the hour's spend exactly on its
// budget (money-hour-gt-ge): the previous bucket empty, the hour's spend
// is a sum of prices, and the model says which send lands there.
func (g *modelGen) spendEdge() {
	hb := micros(g.cfg.Spend.Hour)
	if hb == 0 {
		g.spendBurst()
		return
	}
	g.clock(2*3_600_000 + int64(g.rng.IntN(3_600_000)))
	cand := func() modelStep {
		return modelStep{kind: 's', phone: g.anyPhone(), ip: g.anyIP(), bypass: g.rng.IntN(3) > 0, sig: g.rng.IntN(7)}
	}
	left := 30
	var climb func()
	climb = func() {
		if g.hunt(30, cand, "money-hour") {
			return
		}
		for range 10 {
			s := cand()
			if r, _ := g.h.try(s); r.verdict.counted() {
				g.add(s)
				break
			}
		}
		if left--; left > 0 && len(g.queue) > 0 {
			g.then(climb)
		}
	}
	g.then(func() {
		// A day's spend too near its budget refuses before the hour's
		// meets it: a window later it is empty.
		key := g.h.g.spend(g.h.phones[0]).subjects[0].key
		l := g.h.clock().load(g.h.store.begin(), key, false, "")
		if db := micros(g.cfg.Spend.Day); db > 0 && int64(l.S)+hb > db {
			g.clock(ms(g.cfg.Window) + 2*3_600_000)
		}
		g.then(climb)
	})
}

// probeEdge: a caller sends to numbers nobody verifies until its
// networks refuse (the first refusal is a network's probe time), then
// sends again exactly a probe period after the latest of them, when the
// network lets one through (network-probe-ge-gt).
func (g *modelGen) probeEdge() {
	probe := ms(g.cfg.ProbeEvery)
	if probe == 0 {
		g.storedEdge()
		return
	}
	ip := g.rng.IntN(len(modelIPs) - 1) // not the empty one: it has no networks
	for range 5 + g.rng.IntN(10) {
		g.send(g.anyPhone(), ip)
	}
	g.then(func() {
		wide := "pump:{n:" + wideKey(g.h.ips[ip]) + "}"
		last, key := int64(-1), ""
		for k := range g.h.store.hashes {
			if pr, ok := g.storedTime(k, fieldProbed); ok && strings.Contains(k, wide) && (pr > last || pr == last && k < key) {
				last, key = pr, k
			}
		}
		if last < 0 || last+probe < g.now {
			return
		}
		g.clock(last + probe - g.now)
		g.then(func() {
			ips := modelKeyIPs(key)
			cand := func() modelStep {
				s := modelStep{kind: 's', phone: g.anyPhone(), ip: ip, sig: g.rng.IntN(7)}
				if g.rng.IntN(2) == 0 {
					s.ip = ips[g.rng.IntN(len(ips))]
				}
				return s
			}
			if !g.hunt(40, cand, "probe") {
				g.send(g.anyPhone(), ip)
			}
			g.send(g.anyPhone(), ip)
		})
	})
}

// heldEdge: a country or operator earns room from the hour's approvals
// (hour_factor times them), a burst nobody verifies restricts it, and
// exactly a window after the trip, when the window's budget the trip held
// (rw) lapses, more sends nobody verifies come at one instant: the budget
// they are held to, or a new trip's rw, is the held one a millisecond
// earlier (held-window-lt-le). Only a trip whose held budget beats what the
// subject learned (its peak day) is followed to its edge.
func (g *modelGen) heldEdge() {
	pres := g.countryOrOperator(2)
	none := len(modelIPs) - 1 // no caller networks: no sign
	start := g.now
	for _, p := range g.phones(pres, 2+g.rng.IntN(2)) {
		g.send(p, none)
		g.approve(p)
	}
	phones := g.phones(pres, 10*len(pres))
	cand := func() modelStep {
		return modelStep{kind: 's', phone: phones[g.rng.IntN(len(phones))], ip: none, sig: g.rng.IntN(7)}
	}
	tripped := func() (string, int64, float64) { return g.tripped(phones[0], start) }
	// unsigned is a send nobody verifies that a restricted subject
	// decides, when the model finds one (not one a range refuses first).
	unsigned := func() {
		for range 10 {
			s := cand()
			r, _ := g.h.try(s)
			d := g.h.g.destination(g.h.phones[s.phone]).subjects
			if r.verdict.counted() || r.rule > 0 && r.rule <= len(d) && d[r.rule-1].kind == 'c' {
				g.add(s)
				return
			}
		}
		g.add(cand())
	}
	left := 14
	var burst, edge func()
	burst = func() {
		key, rs, floor := tripped()
		if key == "" {
			if left--; left > 0 {
				unsigned()
				g.then(burst)
			}
			return
		}
		at := rs + ms(g.cfg.Window)
		c := newModelClock(at, ms(bucket), int64(g.cfg.Window/bucket))
		l := c.load(g.h.store.begin(), key, true, "c")
		rw, _ := g.storedTime(key, fieldTripWindow)
		if float64(rw) <= l.budget(floor, g.cfg.Ratio, g.cfg.HourFactor) {
			return // the held budget is no more than the learned one then
		}
		g.clock(at - g.now)
		left = 12
		g.then(edge)
	}
	edge = func() {
		if g.hunt(30, cand, "held") {
			return
		}
		unsigned()
		if left--; left > 0 {
			g.then(edge)
		}
	}
	g.then(burst)
}

// countryOrOperator is a country's prefixes or, one time in odds, one
// operator's.
func (g *modelGen) countryOrOperator(odds int) []int {
	pres := modelCountryPrefixes[g.rng.IntN(len(modelCountryPrefixes))]
	if g.rng.IntN(odds) == 0 {
		pres = []int{modelOperatorPrefixes[g.rng.IntN(len(modelOperatorPrefixes))]}
	}
	return pres
}

// tripped is a key of phone's subjects restricted since start, when, and
// its floor.
func (g *modelGen) tripped(phone int, start int64) (string, int64, float64) {
	for _, sb := range g.h.g.destination(g.h.phones[phone]).subjects {
		if sb.kind != 'c' {
			continue
		}
		floor := float64(sb.floor)
		for _, k := range []string{sb.key, sb.foreign} {
			if rs, ok := g.storedTime(k, fieldRestrictedSince); ok && rs >= start {
				return k, rs, floor
			}
			floor = math.Max(math.Floor(floor/3), 1) // the ledger of networks known abroad's
		}
	}
	return "", 0, 0
}

// pressureEdge: sends nobody verifies restrict a country (or an operator)
// and go on as a burst of refusals; then, one or two of its periods
// later (on the period's edge or past it), a few more, around a quarter
// of the burst's: a restriction renews only while its refusals keep that
// share of their busiest period (pressing: pressure-quarter-4-3,
// pressure-period-ge-gt).
func (g *modelGen) pressureEdge() {
	pres := g.countryOrOperator(3)
	none := len(modelIPs) - 1 // no caller networks: no sign
	start := g.now
	phones := g.phones(pres, 10*len(pres))
	send := func() { g.send(phones[g.rng.IntN(len(phones))], none) }
	for range 12 + g.rng.IntN(16) {
		send()
	}
	period := ms(bucket) / 6
	// quiet: a period or two after the stored period began (on its edge,
	// a millisecond either side, or within it), up to a third of the
	// busiest period's count: between a quarter and a third of it is
	// where the share is told apart.
	quiet := func(periods int64) bool {
		key, _, _ := g.tripped(phones[0], start)
		pt, ok := g.storedTime(key, fieldPressureSince)
		if key == "" || !ok {
			return false
		}
		pp, _ := g.storedTime(key, fieldPressurePeak)
		at := pt + periods*period
		switch g.rng.IntN(4) {
		case 0:
			at += int64(g.rng.IntN(int(period)))
		case 1, 2:
			at += int64(g.rng.IntN(2)*2) - 1
		}
		g.clock(at - g.now)
		for range int(pp)/3 + 1 {
			send()
		}
		return true
	}
	g.then(func() {
		if quiet(1) {
			g.then(func() { quiet(2) }) // the last period's count forgotten
		}
	})
}

// abroadClimb: travellers from one network known abroad earn an
// operator's (or a country's) ledger of networks known abroad room, then
// another network known abroad sends to numbers nobody verifies until
// the ledger trips, and goes on sending while it is restricted, as the
// travellers' late approvals bring it back under its hour's budget: its
// refusals in the hour climb past its floor and twice the travellers'
// average hour, where it is renewed (abroad-renew-gt-ge,
// abroad-renew-twice); and an hour after its first refusal the count
// starts again (abroad-hour-ge-gt).
func (g *modelGen) abroadClimb() {
	if micros(g.cfg.Spend.Hour) > 0 {
		// An hour's spend budget admits a dozen texts: start on an empty one.
		g.clock(2 * 3_600_000)
	}
	// Two callers in different widest networks: the travellers' approvals
	// here do not cost the attacker its sign of a network known abroad.
	wides := map[string][]int{}
	for i, s := range modelIPs[:len(modelIPs)-1] {
		a, _ := netip.ParseAddr(s)
		wides[wideKey(a)] = append(wides[wideKey(a)], i)
	}
	nets := slices.Sorted(maps.Keys(wides))
	g.rng.Shuffle(len(nets), func(i, j int) { nets[i], nets[j] = nets[j], nets[i] })
	pick := func(w string) int { return wides[w][g.rng.IntN(len(wides[w]))] }
	att, trav := pick(nets[0]), pick(nets[1])
	home := []int{modelUS, modelLV}[g.rng.IntN(2)]
	warm := func(ip, n int) {
		for range n {
			p := g.phone(home)
			g.send(p, ip)
			g.approve(p)
		}
	}
	warm(att, 2+g.rng.IntN(2))
	warm(trav, 3+g.rng.IntN(2))
	target := modelOperatorPrefixes[g.rng.IntN(len(modelOperatorPrefixes)-1)] // not LV
	ps := g.phones([]int{target}, 10)
	// A traveller verifies at once (room), one to three more are sent and
	// verify late, once the ledger tripped: k approvals in all, as many
	// as put a count of refusals past the trip's (4 on) above twice the
	// travellers' average hour and not above three times, where an
	// operator's ledger (floor 1) is renewed only by the first.
	k := 2 + g.rng.IntN(2)
	for _, a := range g.rng.Perm(3) {
		x := g.cfg.Ratio * float64(a+2) / float64(g.cfg.Window/bucket)
		if v := math.Max(math.Floor(1+2*x)+1, 4); v <= 1+3*x {
			k = a + 2
			break
		}
	}
	g.send(ps[0], trav)
	g.approve(ps[0])
	for _, p := range ps[1:k] {
		g.send(p, trav)
	}
	late := ps[1:k]
	var foreign []string
	for _, sb := range g.h.g.destination(g.h.phones[ps[0]]).subjects {
		if sb.kind == 'c' {
			foreign = append(foreign, sb.foreign)
		}
	}
	restricted := func() bool {
		for _, k := range foreign {
			if rx, ok := g.storedTime(k, fieldRestrictedUntil); ok && rx > g.now {
				return true
			}
		}
		return false
	}
	cand := func() modelStep {
		return modelStep{kind: 's', phone: ps[k+g.rng.IntN(10-k)], ip: att, sig: g.rng.IntN(7)}
	}
	// attack is the attacker's next send: one an operator or country
	// decides, when the model finds one (not one a range refuses first).
	attack := func() {
		for range 4 {
			s := cand()
			d := g.h.g.destination(g.h.phones[s.phone]).subjects
			if r, _ := g.h.try(s); r.verdict.counted() || r.rule > 0 && r.rule <= len(d) && d[r.rule-1].kind == 'c' {
				g.add(s)
				return
			}
		}
		g.add(cand())
	}
	left := 30
	var climb func()
	climb = func() {
		if left--; left <= 0 {
			// An hour after the first refusal the count starts again.
			for _, k := range foreign {
				if ot, ok := g.storedTime(k, fieldAbroadRefusedSince); ok && ot+3_600_000 >= g.now && g.rng.IntN(2) == 0 {
					g.clock(ot + 3_600_000 - g.now)
					g.then(func() {
						if !g.hunt(30, cand, "abroad-hour", "renew-at", "renew-twice") {
							attack()
						}
					})
					return
				}
			}
			return
		}
		if g.hunt(30, cand, "renew-at", "renew-twice", "abroad-hour") {
			g.then(climb)
			return
		}
		switch {
		case len(late) > 0 && restricted() && g.rng.IntN(2) == 0:
			g.approve(late[0])
			late = late[1:]
		case g.rng.IntN(12) == 0:
			g.clock(int64(g.rng.IntN(300_000)))
		default:
			attack()
			// Seconds apart: a renewal at the instant of the trip (or of
			// the last renewal) writes the same end.
			g.clock(1 + int64(g.rng.IntN(60_000)))
		}
		g.then(climb)
	}
	g.then(climb)
}
