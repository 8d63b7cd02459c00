package pumping

import (
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/internal/luascript"
	"smsgw/internal/testenv"
)

// modelMutant is one small change to a rule of a script: its text old,
// found exactly once in file, replaced by new. TestMatchesReferenceModel
// must fail with any of them in (BenchmarkModelMutants); equivalent
// says why one cannot be told apart, when it cannot.
type modelMutant struct {
	name       string
	file       string // decide.lua, approve.lua or release.lua
	old, new   string
	equivalent string
}

// modelMutants are single mutations of the rules: a comparison flipped, a
// constant moved by one, max for min, a term dropped. Every rule has some:
// the country and operator (signed subjects), their ledgers of networks
// known abroad (travellers), the networks and their signs, the ranges, the
// held budget, the spend ledger, approvals and releases.
var modelMutants = []modelMutant{
	// The operator's ledger of networks known abroad: the travellers'
	// budget (038eb63), the third refusal, the renewal.
	{name: "travellers-budget-undo", file: "decide.lua",
		old: "  if hourOnly then bh = lfloor + math.max(ratio * led.hour, math.ceil(ratio * led.A / nb)) end\n", new: ""},
	{name: "travellers-ceil-floor", file: "decide.lua", old: "math.ceil(ratio * led.A / nb)", new: "math.floor(ratio * led.A / nb)"},
	{name: "travellers-max-min", file: "decide.lua", old: "bh = lfloor + math.max(ratio * led.hour,", new: "bh = lfloor + math.min(ratio * led.hour,"},
	{name: "abroad-third-refusal", file: "decide.lua", old: "tripped = refusedInHour(led) >= 3 end", new: "tripped = refusedInHour(led) >= 2 end"},
	{name: "abroad-renew-twice", file: "decide.lua", old: "lfloor + ratio * 2 * led.A / nb then", new: "lfloor + ratio * 3 * led.A / nb then"},
	{name: "abroad-renew-gt-ge", file: "decide.lua", old: "if refusedInHour(led) > lfloor", new: "if refusedInHour(led) >= lfloor"},
	{name: "abroad-hour-ge-gt", file: "decide.lua", old: "if now - ot >= bucket then", new: "if now - ot > bucket then"},
	{name: "abroad-floor-third", file: "decide.lua", old: "math.max(math.floor(floor / 3), 1)", new: "math.max(math.floor(floor / 2), 1)"},
	{name: "abroad-floor-min-1", file: "decide.lua", old: "math.max(math.floor(floor / 3), 1)", new: "math.max(math.floor(floor / 3), 0)"},
	{name: "trip-refused-before", file: "decide.lua", old: "if led.oq then nq = led.oq - 1 end", new: "if led.oq then nq = led.oq end"},
	// A restriction renewed only under pressure (f588ae8: pq, pt, pl, pp).
	{name: "pressure-quarter-4-3", file: "decide.lua", old: "return math.max(pq, pl) * 4 >= pp", new: "return math.max(pq, pl) * 3 >= pp"},
	{name: "pressure-drop-last", file: "decide.lua", old: "return math.max(pq, pl) * 4 >= pp", new: "return pq * 4 >= pp"},
	{name: "pressure-period-ge-gt", file: "decide.lua", old: "  elseif now - pt >= period then", new: "  elseif now - pt > period then"},
	{name: "pressure-undo", file: "decide.lua",
		old: "  if lrestricted and not st.abroad and (tripped or add == 1) and not pressing(led) then tripped = false end\n", new: ""},
	// The held budget (3b1ec7f, rw).
	{name: "held-budget-undo", file: "decide.lua",
		old: "return math.max(floor + ratio * math.max(st.A, hourf * st.hour, st.pk), st.held or 0)",
		new: "return floor + ratio * math.max(st.A, hourf * st.hour, st.pk)"},
	{name: "held-window-lt-le", file: "decide.lua", old: "now - tonumber(rs) < window then", new: "now - tonumber(rs) <= window then"},
	{name: "held-trip-budget", file: "decide.lua", old: "F.tripWindow, math.floor(wbudget)", new: "F.tripWindow, math.floor(budget)"},
	// The budget every subject shares.
	{name: "earned-drop-peak", file: "decide.lua", old: "math.max(st.A, hourf * st.hour, st.pk)", new: "math.max(st.A, hourf * st.hour)"},
	{name: "earned-drop-hour", file: "decide.lua", old: "math.max(st.A, hourf * st.hour, st.pk)", new: "math.max(st.A, st.pk)"},
	{name: "relearn-14-13", file: "decide.lua", old: "for d = day - 14, day - 1 do", new: "for d = day - 13, day - 1 do"},
	{name: "hour-unverified-drop-approved", file: "decide.lua", old: "st.sprev * (1 - frac) - st.hour, 0)", new: "st.sprev * (1 - frac), 0)"},
	// The country and operator: unsigned sends, restriction.
	{name: "unsigned-over-gt-ge", file: "decide.lua", old: "local over = u + add > budget and not hourOnly", new: "local over = u + add >= budget and not hourOnly"},
	{name: "unsigned-overh-gt-ge", file: "decide.lua", old: "local overh = short and led.uh + add > bh", new: "local overh = short and led.uh + add >= bh"},
	{name: "unsigned-hour-drop-ratio", file: "decide.lua", old: "local bh = lfloor + ratio * led.hour", new: "local bh = lfloor + led.hour"},
	{name: "operator-short-peak", file: "decide.lua", old: "or st.abroad or led.pk > 0", new: "or st.abroad or led.pk > 1"},
	{name: "restricted-gt-ge", file: "decide.lua", old: "return st.rx ~= nil and st.rx > now", new: "return st.rx ~= nil and st.rx >= now"},
	{name: "unsigned-retry-min", file: "decide.lua", old: "led.rx or 0) - now, 1000)", new: "led.rx or 0) - now, 999)"},
	{name: "challenged-gt-ge", file: "decide.lua", old: "if u + add > budget and string.sub(sb.p2, 1, 1) == '1' then", new: "if u + add >= budget and string.sub(sb.p2, 1, 1) == '1' then"},
	// The phone's record.
	{name: "record-counted-ge-gt", file: "decide.lua", old: "counted = h ~= nil and h >= oldest", new: "counted = h ~= nil and h > oldest"},
	{name: "record-again-3-4", file: "decide.lua", old: "again = counted and resends >= 3", new: "again = counted and resends >= 4"},
	// The signs of a real user.
	{name: "good-window-le-lt", file: "decide.lua", old: "st.S - st.A <= st.A + 1 and", new: "st.S - st.A < st.A + 1 and"},
	{name: "good-hour-slack-2-1", file: "decide.lua", old: "st.uh <= st.hour + 2", new: "st.uh <= st.hour + 1"},
	{name: "good-approved-1-2", file: "decide.lua", old: "return st.A >= 1 and", new: "return st.A >= 2 and"},
	{name: "bad-gt-ge", file: "decide.lua", old: "elseif st.S - st.A > st.A + 1 then", new: "elseif st.S - st.A >= st.A + 1 then"},
	{name: "foreign-elsewhere-2-3", file: "decide.lua", old: "return elsewhere >= 2 and", new: "return elsewhere >= 3 and"},
	{name: "foreign-twice-lt-le", file: "decide.lua", old: "here.A * 2 < elsewhere", new: "here.A * 2 <= elsewhere"},
	{name: "returning-ge-gt", file: "decide.lua", old: "if d ~= nil and d >= math.floor(now / 86400000) - retdays then", new: "if d ~= nil and d > math.floor(now / 86400000) - retdays then"},
	// Ranges and networks.
	{name: "range-gt-ge", file: "decide.lua", old: "if counted then need = u end\n  st.refuse = need > budget", new: "if counted then need = u end\n  st.refuse = need >= budget"},
	{name: "network-gt-ge", file: "decide.lua", old: "if free then need = u end\n  st.refuse = need > budget", new: "if free then need = u end\n  st.refuse = need >= budget"},
	{name: "network-probe-ge-gt", file: "decide.lua", old: "elseif now - st.pr >= probe then", new: "elseif now - st.pr > probe then"},
	// The spend ledger.
	{name: "money-hour-gt-ge", file: "decide.lua", old: "if hb > 0 and hour + price > hb then", new: "if hb > 0 and hour + price >= hb then"},
	{name: "money-day-gt-ge", file: "decide.lua", old: "elseif db > 0 and st.S + price > db then", new: "elseif db > 0 and st.S + price >= db then"},
	// The window and the reply.
	{name: "wait-lt-le", file: "decide.lua", old: "if u < budget then return (x + nb) * bucket - now end", new: "if u <= budget then return (x + nb) * bucket - now end"},
	{name: "near-ge-gt", file: "decide.lua", old: "if budget > 0 and u / budget >= nearr then", new: "if budget > 0 and u / budget > nearr then"},
	{name: "store-refresh-lt-le", file: "decide.lua", old: "local refresh = x == nil or x - now < keep - bucket", new: "local refresh = x == nil or x - now <= keep - bucket"},
	{name: "slide-all-ge-gt", file: "decide.lua", old: "if oldest - b >= nb then", new: "if oldest - b > nb then",
		equivalent: "with every bucket gone, subtracting them one by one (the other branch) leaves the same sums and fields: " +
			"approve.lua counts only in buckets at or after the stored oldest, so no field is older than it"},
	// approve.lua.
	{name: "approve-counted-lt-le", file: "approve.lua", old: "if h == nil or h < oldest then", new: "if h == nil or h <= oldest then"},
	{name: "approve-learned-15-14", file: "approve.lua", old: "local learned = 15 * bucket * nb", new: "local learned = 14 * bucket * nb"},
	{name: "approve-refresh-lt-le", file: "approve.lua", old: "x - now < learned - bucket", new: "x - now <= learned - bucket"},
	{name: "approve-drop-challenge", file: "approve.lua", old: "    if k then credit(KEYS[j + 1]) end\n", new: ""},
	{name: "approve-drop-foreign", file: "approve.lua", old: "    if f then credit(KEYS[j + 2]) end\n", new: ""},
	{name: "approve-drop-owed", file: "approve.lua", old: "    if owed then\n      redis.call('HDEL', rec, F.recOwed)\n      return {1, netid or ''}\n    end\n", new: ""},
	// release.lua.
	{name: "release-resends-0-1", file: "release.lua", old: "if t ~= nil and t > 0 then", new: "if t ~= nil and t > 1 then"},
	{name: "release-range-anew", file: "release.lua", old: "  if kind == 'r' and not new then return end\n", new: ""},
	{name: "release-foreign-ge-gt", file: "release.lua", old: "amount >= 4", new: "amount > 4"},
	{name: "release-free-networks", file: "release.lua", old: "elseif ARGV[3] == '3' then", new: "elseif ARGV[3] == '2' then"},
}

// mutated is the scripts with m applied to its file, as luascript.Source
// builds them; it fails when m's text is not in the file exactly once, so
// the list cannot rot silently when a script changes.
func (m modelMutant) mutated(t testing.TB) modelScripts {
	t.Helper()
	src := func(name string) string {
		b, err := luaFiles.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if name == m.file {
			if n := strings.Count(s, m.old); n != 1 {
				t.Fatalf("mutant %s: its text is in %s %d times, want once: %q", m.name, m.file, n, m.old)
			}
			s = strings.Replace(s, m.old, m.new, 1)
		}
		return luascript.Prelude() + fieldsLua + s
	}
	return modelScripts{redis.NewScript(src("decide.lua")), redis.NewScript(src("approve.lua")), redis.NewScript(src("release.lua"))}
}

// TestModelMutantsApply checks that every mutant's text is in its script
// once (and that mutated builds the package's scripts from an empty
// change): cheap, so it runs always.
func TestModelMutantsApply(t *testing.T) {
	none := modelMutant{name: "none", file: "decide.lua", old: "local now = clock(1000)", new: "local now = clock(1000)"}
	if got, want := none.mutated(t), packageScripts(); got.decide.Hash() != want.decide.Hash() ||
		got.approve.Hash() != want.approve.Hash() || got.release.Hash() != want.release.Hash() {
		t.Fatal("mutated builds scripts other than the package's")
	}
	names := map[string]bool{}
	for _, m := range modelMutants {
		if names[m.name] {
			t.Errorf("mutant %s twice", m.name)
		}
		names[m.name] = true
		m.mutated(t)
	}
}

// BenchmarkModelMutants is the mutation sweep, a tool run by hand, never
// by make test (a benchmark, as the simulation is): it runs
// TestMatchesReferenceModel's runs, both layouts at the default steps
// (SMSGW_MODEL_STEPS), with each mutant's scripts (SMSGW_MUTANTS, a regexp
// of mutant names; all when unset), over SMSGW_MUTANTS_SEEDS seeds
// (default 3, from SMSGW_MODEL_SEED or 1), prints a table of which seeds
// caught which mutant and fails when one that is not equivalent was
// missed by any.
//
//	SMSGW_TEST_REDIS_URL=redis://127.0.0.1:16950/0 \
//	  go test -run '^$' -bench BenchmarkModelMutants -benchtime 1x -timeout 60m ./pumping
func BenchmarkModelMutants(b *testing.B) { modelMutantSweep(b) }

func modelMutantSweep(t testing.TB) {
	pick := os.Getenv("SMSGW_MUTANTS")
	if pick == "" {
		pick = "1"
	}
	re := regexp.MustCompile(".")
	if pick != "1" {
		re = regexp.MustCompile(pick)
	}
	seeds, base := 3, uint64(1)
	if s := os.Getenv("SMSGW_MUTANTS_SEEDS"); s != "" {
		seeds, _ = strconv.Atoi(s)
	}
	if s := os.Getenv("SMSGW_MODEL_SEED"); s != "" {
		base, _ = strconv.ParseUint(s, 10, 64)
	}
	steps := 10_000
	if s := os.Getenv("SMSGW_MODEL_STEPS"); s != "" {
		steps, _ = strconv.Atoi(s)
	}
	rdb, prefix := testenv.Redis(t)
	rdb = modelClient(t, rdb)
	var n atomic.Int64
	// sweep runs one seed's runs (both layouts) with scripts, all at once,
	// and returns the first difference found ("" none) and when.
	sweep := func(scripts modelScripts, seed uint64) (string, time.Duration) {
		start := time.Now()
		var stop atomic.Bool
		var mu sync.Mutex
		first := ""
		var wg sync.WaitGroup
		for _, cluster := range []bool{false, true} {
			for run := range modelRuns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rec := &recordingTB{TB: t}
					h := runModelSequenceSafe(rec, rdb, fmt.Sprintf("%sm%d:", prefix, n.Add(1)), cluster, seed, run, steps/modelRuns, scripts, &stop)
					if h != nil && !rec.Failed() && !stop.Load() {
						h.checkAll()
					}
					if h != nil {
						h.cleanup()
					}
					if rec.Failed() {
						stop.Store(true)
						mu.Lock()
						if first == "" {
							first = fmt.Sprintf("cluster=%v run=%d: %s", cluster, run, rec.first())
							if os.Getenv("SMSGW_MUTANTS_VERBOSE") != "" {
								t.Logf("seed %d cluster=%v run=%d:\n%s", seed, cluster, run, strings.Join(rec.msgs, "\n"))
							}
						}
						mu.Unlock()
					}
				}()
			}
		}
		wg.Wait()
		return first, time.Since(start)
	}
	// The package's own scripts must pass on these seeds, or a catch
	// would mean nothing.
	for s := range seeds {
		if diff, _ := sweep(packageScripts(), base+uint64(s)); diff != "" {
			t.Fatalf("the package's scripts differ from the model at seed %d: %s", base+uint64(s), diff)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| mutant | file | caught | first difference (seed %d) |\n|---|---|---|---|\n", base)
	caught, missed, total := 0, 0, 0
	for _, m := range modelMutants {
		if !re.MatchString(m.name) {
			continue
		}
		total++
		scripts := m.mutated(t)
		hits, why := 0, ""
		var took time.Duration
		for s := range seeds {
			diff, d := sweep(scripts, base+uint64(s))
			took += d
			if diff != "" {
				hits++
				if why == "" {
					why = diff
				}
			}
		}
		switch {
		case hits == seeds:
			caught++
		case m.equivalent != "":
			why = "equivalent: " + m.equivalent
		default:
			missed++
			t.Errorf("mutant %s: caught by %d of %d seeds", m.name, hits, seeds)
		}
		fmt.Fprintf(&b, "| %s | %s | %d/%d | %s |\n", m.name, m.file, hits, seeds, why)
		t.Logf("%s: %d/%d in %v", m.name, hits, seeds, took.Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "\n%d mutants, %d caught by every seed, %d missed by some (%d steps per layout, seeds %d..%d)\n",
		total, caught, missed, steps, base, base+uint64(seeds)-1)
	t.Log(b.String())
}

// runModelSequenceSafe is runModelSequence ending quietly when the harness
// calls t.Fatal (recordingTB ends the goroutine with runtime.Goexit).
func runModelSequenceSafe(t *recordingTB, rdb *redis.Client, prefix string, cluster bool, seed uint64, run, steps int,
	scripts modelScripts, stop *atomic.Bool) (h *modelHarness) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		h = runModelSequence(t, rdb, prefix, cluster, seed, run, steps, scripts, stop)
	}()
	<-done
	return h
}

// recordingTB keeps a run's failures instead of failing the sweep: a
// mutant is meant to fail.
type recordingTB struct {
	testing.TB
	mu   sync.Mutex
	msgs []string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Errorf(format string, args ...any) { r.record(fmt.Sprintf(format, args...)) }
func (r *recordingTB) Error(args ...any)                 { r.record(fmt.Sprint(args...)) }
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.record(fmt.Sprintf(format, args...))
	runtime.Goexit()
}
func (r *recordingTB) Fatal(args ...any)   { r.record(fmt.Sprint(args...)); runtime.Goexit() }
func (r *recordingTB) Log(...any)          {}
func (r *recordingTB) Logf(string, ...any) {}

func (r *recordingTB) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs) > 0
}

func (r *recordingTB) record(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, s)
}

// first is the first failure's first line and what it compared.
func (r *recordingTB) first() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.msgs) == 0 {
		return ""
	}
	line, _, _ := strings.Cut(r.msgs[0], "\n")
	if len(line) > 140 {
		line = line[:140] + "…"
	}
	return strings.ReplaceAll(line, "|", "\\|")
}
