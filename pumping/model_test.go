package pumping

import (
	"fmt"
	"maps"
	"math/rand/v2"
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
	h := newModelHarnessWith(t, rdb, prefix, cluster, randomModelConfig(rng), scripts)
	for range steps {
		h.step(randomModelStep(rng))
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
		cfg.Spend = Spend{Default: 0.05, Prices: map[string]float64{"NG": 0.2}, Hour: []float64{0, 0.6}[rng.IntN(2)], Day: 1.5}
	}
	return cfg
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
	h.t.Logf("run %s:%s", h.prefix, b.String())
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
