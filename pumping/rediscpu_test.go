package pumping_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/admission"
	"smsgw/codestore"
	"smsgw/internal/luascript"
	"smsgw/internal/redisbatch"
	"smsgw/otp"
	"smsgw/pumping"
	"smsgw/ratelimit"
)

// BenchmarkRedisCPUPerSend says where an accepted send's Redis CPU goes:
// each part of the composed send script run alone (allow.lua's windows for
// phone and IP, decide.lua with the shipped subjects, issue.lua, claim.lua),
// then the composed script, for fresh phones and fresh client addresses as
// make bench-http sends them (pumping in shadow mode, as it runs it). For
// each it reads INFO cpu and INFO commandstats before and after N calls
// (pipelined 32 to a round trip, as the batcher carries them) and prints
// the µs of Redis CPU per send, the EVALSHA's own µs, and each inner
// command's calls and µs per send. "decide, commands only" replays the
// exact commands decide.lua made (logged on a second server) with no logic
// around them, to part the interpreter's cost from the commands'. The
// "floor" parts store a send's pumping keys in other ways, without rule
// logic, to bound what another data model could cost.
//
// It empties its servers and resets their statistics: give it empty
// servers of its own (it refuses a server with keys):
//
//	SMSGW_CPU_REDIS=127.0.0.1:16923 SMSGW_CPU_REDIS_LOG=127.0.0.1:16924 \
//	  go test -run '^$' -bench RedisCPUPerSend -benchtime 1x -v ./pumping
//
// SMSGW_CPU_NUMBERS=operators sends to Nigerian numbers of four operators
// instead of American ones (which have no operator data).
// (each a redis-server --port N --save "" --appendonly no of your own).
func BenchmarkRedisCPUPerSend(b *testing.B) {
	addr, logAddr := os.Getenv("SMSGW_CPU_REDIS"), os.Getenv("SMSGW_CPU_REDIS_LOG")
	if addr == "" || logAddr == "" {
		b.Skip("set SMSGW_CPU_REDIS and SMSGW_CPU_REDIS_LOG to private redis-servers (their stats are reset)")
	}
	n := 20000
	if v, err := strconv.Atoi(os.Getenv("SMSGW_CPU_SENDS")); err == nil && v > 0 {
		n = v
	}
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	logRdb := redis.NewClient(&redis.Options{Addr: logAddr})
	defer rdb.Close()
	defer logRdb.Close()
	for _, c := range []*redis.Client{rdb, logRdb} {
		if keys, err := c.DBSize(ctx).Result(); err != nil || keys != 0 {
			b.Fatalf("%s: %d keys, %v: the benchmark flushes its servers, give it empty ones of its own", c, keys, err)
		}
	}
	// SMSGW_CPU_ONLY, a comma-separated list of substrings, picks parts;
	// SMSGW_CPU_ROUNDS repeats them (in turn, each round in the same order).
	want := func(name string) bool {
		only := os.Getenv("SMSGW_CPU_ONLY")
		for _, o := range strings.Split(only, ",") {
			if strings.Contains(name, o) {
				return true
			}
		}
		return only == ""
	}
	rounds := 1
	if v, err := strconv.Atoi(os.Getenv("SMSGW_CPU_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	run := fmt.Sprintf("cpu%d:", time.Now().UnixNano())
	cfg := pumping.DefaultConfig()
	cfg.Mode = pumping.ModeShadow

	type part struct {
		name string
		// calls returns send i's script calls (one per send).
		calls func(prefix string, i int) []scriptCall
	}
	type stores struct {
		l  *ratelimit.Limiter
		g  *pumping.Guard
		c  *codestore.Store
		id *codestore.Idempotency
	}
	byPrefix := map[string]stores{}
	built := func(prefix string) (*ratelimit.Limiter, *pumping.Guard, *codestore.Store, *codestore.Idempotency) {
		st, ok := byPrefix[prefix]
		if !ok {
			s := direct{rdb}
			st = stores{ratelimit.New(rdb, prefix, ratelimit.Options{Scripts: s}),
				pumping.New(rdb, prefix, cfg, pumping.Options{Scripts: s}),
				codestore.New(rdb, prefix, s), codestore.NewIdempotency(rdb, prefix)}
			byPrefix[prefix] = st
		}
		return st.l, st.g, st.c, st.id
	}
	allow := redis.NewScript(ratelimit.AllowLua())
	decide := redis.NewScript(pumping.DecideLua())
	issue := redis.NewScript(codestore.IssueLua())
	claim := redis.NewScript(codestore.ClaimLua())
	logged := redis.NewScript(loggingDecide())
	wrapped := redis.NewScript("local function decide(KEYS, ARGV)\n" + pumping.DecideLua() + "\nend\nreturn decide(KEYS, ARGV)")
	packed := redis.NewScript(packedFloor)
	mgetMset := redis.NewScript(`local v = redis.call('MGET', unpack(KEYS))
local f = {}
for i = 1, #KEYS do f[#f + 1], f[#f + 2] = KEYS[i], '1 2 3 4 5 6 7 8' end
redis.call('MSET', unpack(f))
return 1`)
	empty := redis.NewScript("return 1")
	short := redis.NewScript(shortFloor)
	binary := redis.NewScript(strings.ReplaceAll(strings.ReplaceAll(shortFloor,
		"string.match(vals[i], '(%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+)')", "struct.unpack('<i4i4i4dI4I4I4I4', vals[i])"),
		"b .. ' ' .. S .. ' ' .. A .. ' ' .. x .. ' ' .. s0 .. ' ' .. s1 .. ' ' .. a0 .. ' ' .. a1", "struct.pack('<i4i4i4dI4I4I4I4', b, S, A, x, s0, s1, a0, a1)"))
	replay := redis.NewScript(replaySource)
	code := otp.StoredCode{MAC: []byte("0123456789abcdef0123456789abcdef"), Sealed: []byte("sealed-code-of-the-benchmark-0123456789")}

	parts := []part{
		{"allow.lua (phone + IP windows)", func(prefix string, i int) []scriptCall {
			l, _, _, _ := built(prefix)
			ph, ip := fresh(b, i)
			w, err := l.Windows(fmt.Sprint(i), sendSubjects(ph, ip))
			if err != nil {
				b.Fatal(err)
			}
			return []scriptCall{{allow, w.Keys, w.Args}}
		}},
		{"decide.lua (shipped subjects)", func(prefix string, i int) []scriptCall {
			_, g, _, _ := built(prefix)
			ph, ip := fresh(b, i)
			d, err := g.Decision(ctx, ph, ip, false)
			if err != nil {
				b.Fatal(err)
			}
			return []scriptCall{{decide, d.Keys, d.Args}}
		}},
		{"decide.lua wrapped as admission wraps it", func(prefix string, i int) []scriptCall {
			_, g, _, _ := built(prefix)
			ph, ip := fresh(b, i)
			d, err := g.Decision(ctx, ph, ip, false)
			if err != nil {
				b.Fatal(err)
			}
			return []scriptCall{{wrapped, d.Keys, d.Args}}
		}},
		{"packed model floor (MGET, SET per key)", func(prefix string, i int) []scriptCall {
			_, g, _, _ := built(prefix)
			ph, ip := fresh(b, i)
			d, err := g.Decision(ctx, ph, ip, false)
			if err != nil {
				b.Fatal(err)
			}
			return []scriptCall{{packed, d.Keys, nil}}
		}},
		{"floor: one MGET, one MSET of 13 small strings", func(prefix string, i int) []scriptCall {
			_, g, _, _ := built(prefix)
			ph, ip := fresh(b, i)
			d, err := g.Decision(ctx, ph, ip, false)
			if err != nil {
				b.Fatal(err)
			}
			return []scriptCall{{mgetMset, d.Keys, nil}}
		}},
		{"floor: MGET, MSET of short packed strings, PEXPIRE new keys", func(prefix string, i int) []scriptCall {
			_, g, _, _ := built(prefix)
			ph, ip := fresh(b, i)
			d, err := g.Decision(ctx, ph, ip, false)
			if err != nil {
				b.Fatal(err)
			}
			return []scriptCall{{short, d.Keys, nil}}
		}},
		{"floor: MGET, MSET of struct-packed binary, PEXPIRE new keys", func(prefix string, i int) []scriptCall {
			_, g, _, _ := built(prefix)
			ph, ip := fresh(b, i)
			d, err := g.Decision(ctx, ph, ip, false)
			if err != nil {
				b.Fatal(err)
			}
			return []scriptCall{{binary, d.Keys, nil}}
		}},
		{"floor: an empty script, decide's KEYS and ARGV", func(prefix string, i int) []scriptCall {
			_, g, _, _ := built(prefix)
			ph, ip := fresh(b, i)
			d, err := g.Decision(ctx, ph, ip, false)
			if err != nil {
				b.Fatal(err)
			}
			return []scriptCall{{empty, d.Keys, d.Args}}
		}},
		{"issue.lua", func(prefix string, i int) []scriptCall {
			_, _, c, _ := built(prefix)
			ph, _ := fresh(b, i)
			k, a := c.IssueCall(ph.E164, code, 10*time.Minute)
			return []scriptCall{{issue, k, a}}
		}},
		{"claim.lua (keyed sends only)", func(prefix string, i int) []scriptCall {
			_, _, _, id := built(prefix)
			k, a := id.ClaimCall("scope-"+strconv.Itoa(i), strconv.Itoa(i), time.Hour)
			return []scriptCall{{claim, k, a}}
		}},
	}
	// What each rule costs: decide.lua with the shipped subjects but one
	// kind turned off (its floors 0, as a config turns a rule off), next to
	// decide.lua with all of them in the same run. A kind's cost is the
	// difference. The operator rule only applies to numbers with operator
	// data (SMSGW_CPU_NUMBERS=operators).
	for _, off := range []struct {
		name  string
		rules []string
	}{
		{"ranges", []string{pumping.RuleRange100, pumping.RuleRange1k, pumping.RuleRange10k, pumping.RuleRange100k}},
		{"operator", []string{pumping.RuleOperator}},
		{"country", []string{pumping.RuleCountry}},
		{"networks", []string{pumping.RuleNet64, pumping.RuleNet56, pumping.RuleNet48, pumping.RuleNet6x32,
			pumping.RuleNet32, pumping.RuleNet24, pumping.RuleNet16}},
	} {
		c := cfg
		c.Floors = maps.Clone(cfg.Floors)
		for _, r := range off.rules {
			c.Floors[r] = 0
		}
		guards := map[string]*pumping.Guard{}
		parts = append(parts, part{"decide.lua without " + off.name, func(prefix string, i int) []scriptCall {
			g := guards[prefix]
			if g == nil {
				g = pumping.New(rdb, prefix, c, pumping.Options{Scripts: direct{rdb}})
				guards[prefix] = g
			}
			ph, ip := fresh(b, i)
			d, err := g.Decision(ctx, ph, ip, false)
			if err != nil {
				b.Fatal(err)
			}
			return []scriptCall{{decide, d.Keys, d.Args}}
		}})
	}
	// SMSGW_CPU_DECIDE_BEFORE names another decide.lua (of the same
	// protocol), e.g. main's, to measure in the same run.
	if path := os.Getenv("SMSGW_CPU_DECIDE_BEFORE"); path != "" {
		src, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		other := redis.NewScript(luascript.Prelude() + pumping.FieldsLua + string(src)) // as pumping loads its own
		parts = append(parts[:2:2], append([]part{{"decide.lua from " + path, func(prefix string, i int) []scriptCall {
			_, g, _, _ := built(prefix)
			ph, ip := fresh(b, i)
			d, err := g.Decision(ctx, ph, ip, false)
			if err != nil {
				b.Fatal(err)
			}
			return []scriptCall{{other, d.Keys, d.Args}}
		}}}, parts[2:]...)...)
	}
	var rows []cpuRow
	for round := range rounds {
		for pi, p := range parts {
			if !want(p.name) {
				continue
			}
			prefix := run + strconv.Itoa(round) + ":" + strconv.Itoa(pi) + ":"
			clear(byPrefix)
			calls := make([]scriptCall, 0, n)
			for i := range n {
				calls = append(calls, p.calls(prefix, i)...)
			}
			r := measure(b, rdb, p.name, n, func() {
				runCalls(b, rdb, calls)
			})
			r.round = round
			rows = append(rows, r)
		}
		// The composed script, as an accepted send of the service runs it: 32
		// sends at a time through the batcher, as the service's replicas do.
		if want("composed send script") {
			prefix := run + strconv.Itoa(round) + ":composed:"
			// A busy machine can stall a call past the service's 1 s: the CPU,
			// not the latency, is measured here.
			batch := redisbatch.New(rdb, redisbatch.Options{Timeout: time.Minute})
			bctx, stop := context.WithCancel(ctx)
			defer stop()
			go batch.Serve(bctx) //nolint:errcheck
			s := batch
			l := ratelimit.New(rdb, prefix, ratelimit.Options{Scripts: s})
			g := pumping.New(rdb, prefix, cfg, pumping.Options{Scripts: s})
			a := admission.New(s, l, g, codestore.New(rdb, prefix, s), codestore.NewIdempotency(rdb, prefix))
			rows = append(rows, measure(b, rdb, "composed send script", n, func() {
				var wg sync.WaitGroup
				errs := make(chan error, 32)
				for w := range 32 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := w; i < n; i += 32 {
							ph, ip := fresh(b, i)
							out, err := a.Admit(ctx, otp.Admission{Ticket: strconv.Itoa(i), Phone: ph, ClientIP: ip,
								Subjects: sendSubjects(ph, ip), Pumping: true, Code: code, CodeTTL: 10 * time.Minute})
							if err == nil && !out.Issued {
								err = fmt.Errorf("send %d: %+v", i, out)
							}
							if err != nil {
								errs <- err
								return
							}
						}
					}()
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					b.Fatal(err)
				}
			}))
		}
		// The same composed calls, recorded without running them, then sent
		// 32 to a pipeline like the parts above: what the batcher's way of
		// sending them adds.
		if want("composed, pipelined") {
			prefix := run + strconv.Itoa(round) + ":composedp:"
			rec := &recorder{}
			l := ratelimit.New(rdb, prefix, ratelimit.Options{Scripts: rec})
			g := pumping.New(rdb, prefix, cfg, pumping.Options{Scripts: rec})
			a := admission.New(rec, l, g, codestore.New(rdb, prefix, rec), codestore.NewIdempotency(rdb, prefix))
			for i := range n {
				ph, ip := fresh(b, i)
				// The recorder answers nothing: Admit fails after the call.
				a.Admit(ctx, otp.Admission{Ticket: strconv.Itoa(i), Phone: ph, ClientIP: ip, //nolint:errcheck
					Subjects: sendSubjects(ph, ip), Pumping: true, Code: code, CodeTTL: 10 * time.Minute})
			}
			if len(rec.calls) != n {
				b.Fatalf("recorded %d calls for %d sends", len(rec.calls), n)
			}
			rows = append(rows, measure(b, rdb, "composed, pipelined 32 a trip", n, func() {
				runCalls(b, rdb, rec.calls)
			}))
		}
		// decide.lua's commands alone: log them on the second server, replay
		// them here.
		if want("decide.lua, its commands only") {
			flush(b, logRdb)
			prefix := run + strconv.Itoa(round) + ":replay:"
			_, g, _, _ := built(prefix)
			replays := make([]scriptCall, 0, n)
			for i := range n {
				ph, ip := fresh(b, i)
				d, err := g.Decision(ctx, ph, ip, false)
				if err != nil {
					b.Fatal(err)
				}
				v, err := logged.Run(ctx, logRdb, d.Keys, d.Args...).Slice()
				if err != nil {
					b.Fatal(err)
				}
				replays = append(replays, scriptCall{replay, nil, v})
			}
			rows = append(rows, measure(b, rdb, "decide.lua, its commands only", n, func() {
				runCalls(b, rdb, replays)
			}))
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "%d sends each; µs of Redis CPU per send (used_cpu_user+sys), EVALSHA's own usec, inner commands\n", n)
	for _, r := range rows {
		fmt.Fprintf(&out, "%-34s cpu %6.1f µs  evalsha %6.1f µs  inner %5.1f cmds %6.1f µs:", r.name, r.cpu, r.eval, r.cmds, r.inner)
		for _, c := range r.each {
			fmt.Fprintf(&out, " %s %.2f/%.1fµs", c.name, c.calls, c.usec)
		}
		out.WriteString("\n")
	}
	// Each rule's cost: decide.lua with every shipped subject less decide.lua
	// without that rule, in the same round.
	full := map[int]float64{}
	for _, r := range rows {
		if r.name == "decide.lua (shipped subjects)" {
			full[r.round] = r.cpu
		}
	}
	for _, r := range rows {
		if rule, ok := strings.CutPrefix(r.name, "decide.lua without "); ok {
			if f, ok := full[r.round]; ok {
				fmt.Fprintf(&out, "round %d: %-10s costs %6.1f µs of Redis CPU per send (%.1f with it, %.1f without)\n", r.round, rule, f-r.cpu, f, r.cpu)
			}
		}
	}
	b.Log("\n" + out.String())
	flush(b, rdb)
	flush(b, logRdb)
}

// flush empties one of the benchmark's own servers (checked empty at the
// start): every part starts from an empty keyspace, so none pays for the
// keys or the rehashing another left behind.
func flush(b *testing.B, rdb *redis.Client) {
	if err := rdb.FlushAll(context.Background()).Err(); err != nil {
		b.Fatal(err)
	}
}

// direct runs scripts on the client, one call a round trip.
type direct struct{ rdb *redis.Client }

func (d direct) Run(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	return s.Run(ctx, d.rdb, keys, args...)
}

// recorder records script calls instead of running them.
type recorder struct{ calls []scriptCall }

func (r *recorder) Run(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	r.calls = append(r.calls, scriptCall{s, keys, args})
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(errors.New("recorded, not run"))
	return cmd
}

type scriptCall struct {
	s    *redis.Script
	keys []string
	args []any
}

func runCalls(b *testing.B, rdb *redis.Client, calls []scriptCall) {
	ctx := context.Background()
	for _, c := range calls[:1] {
		if err := c.s.Load(ctx, rdb).Err(); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < len(calls); i += 32 {
		pipe := rdb.Pipeline()
		for _, c := range calls[i:min(i+32, len(calls))] {
			c.s.EvalSha(ctx, pipe, c.keys, c.args...)
		}
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
			b.Fatal(err)
		}
	}
}

// fresh is send i's number and client address, as make bench-http's
// "fresh" mode makes them (internal/benchhttp/send.lua).
func fresh(b testing.TB, i int) (otp.Phone, netip.Addr) {
	areas := []string{"206", "212", "213", "310", "312", "415", "617", "702", "718", "646"}
	raw := fmt.Sprintf("+1%s%03d%04d", areas[i/8000000%10], 200+i/10000%800, i%10000)
	if os.Getenv("SMSGW_CPU_NUMBERS") == "operators" {
		// Nigerian numbers over four operators: every send also counts in
		// its operator (the US has no operator data).
		ops := []string{"803", "805", "802", "809", "806", "807", "808", "813", "815", "812"}
		raw = fmt.Sprintf("+234%s%07d", ops[i%10], i/10%10_000_000)
	}
	p, err := otp.ParsePhone(raw, "")
	if err != nil {
		b.Fatalf("%s: %v", raw, err)
	}
	return p, netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
}

// sendSubjects are the shipped send windows (config.toml's limits.phone
// and limits.ip).
func sendSubjects(p otp.Phone, ip netip.Addr) []otp.Subject {
	return []otp.Subject{
		{Scope: "phone", Key: otp.SendPhoneKey + p.E164, Country: p.Country(),
			Rules: []otp.Rule{{Window: time.Minute, Max: 1}, {Window: 10 * time.Minute, Max: 5}, {Window: time.Hour, Max: 10}}},
		{Scope: "ip", Key: "send:ip:" + ip.String(),
			Rules: []otp.Rule{{Window: time.Minute, Max: 5}, {Window: 10 * time.Minute, Max: 30}, {Window: time.Hour, Max: 50}}},
	}
}

type cpuRow struct {
	name                   string
	round                  int
	cpu, eval, cmds, inner float64
	each                   []cmdCost
}

type cmdCost struct {
	name        string
	calls, usec float64
}

func measure(b *testing.B, rdb *redis.Client, name string, n int, run func()) cpuRow {
	ctx := context.Background()
	flush(b, rdb)
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	before := usedCPU(b, rdb)
	run()
	after := usedCPU(b, rdb)
	stats, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	r := cpuRow{name: name, cpu: (after - before) * 1e6 / float64(n)}
	for _, line := range strings.Split(stats, "\n") {
		cmd, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(cmd, "cmdstat_") {
			continue
		}
		cmd = strings.TrimPrefix(cmd, "cmdstat_")
		var calls, usec float64
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			f, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "calls":
				calls = f
			case "usec":
				usec = f
			}
		}
		switch cmd {
		case "evalsha", "eval":
			r.eval += usec / float64(n)
		case "info", "config|resetstat", "script|load", "config":
		default:
			c := cmdCost{cmd, calls / float64(n), usec / float64(n)}
			r.each = append(r.each, c)
			r.cmds += c.calls
			r.inner += c.usec
		}
	}
	sort.Slice(r.each, func(i, j int) bool { return r.each[i].usec > r.each[j].usec })
	return r
}

func usedCPU(b *testing.B, rdb *redis.Client) float64 {
	s, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return total
}

// loggingDecide is decide.lua with every redis.call logged: it returns the
// commands it made, flat (per command its length, then its arguments).
func loggingDecide() string {
	src := strings.ReplaceAll(pumping.DecideLua(), "redis.call(", "rc(")
	return `local log = {}
local function rc(...)
  local a = {...}
  log[#log + 1] = #a
  for i = 1, #a do log[#log + 1] = a[i] end
  return redis.call(...)
end
local function decide(KEYS, ARGV)
` + src + `
end
decide(KEYS, ARGV)
return log`
}

// replaySource makes the commands loggingDecide logged, nothing else.
const replaySource = `
local i, n = 1, #ARGV
while i <= n do
  local c = tonumber(ARGV[i])
  redis.call(unpack(ARGV, i + 1, i + c))
  i = i + c + 1
end
return 1`

// packedFloor is the least a send could cost with each subject's state
// packed in one string (a MessagePack array of its 24 hourly buckets of
// texts and of approvals and its sums, expiry inside): one MGET of every
// key, the buckets unpacked, one count added, packed again, one SET PXAT
// per key. No rule logic: a floor, not a design.
const packedFloor = `
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local cur = math.floor(now / 3600000)
local vals = redis.call('MGET', unpack(KEYS))
for i = 1, #KEYS do
  local st
  if vals[i] then st = cmsgpack.unpack(vals[i]) else
    st = {cur, 0, 0, 0, 0, now + 172800000}
    for j = 1, 48 do st[#st + 1] = 0 end
  end
  local slot = 7 + cur % 24
  st[slot] = st[slot] + 1
  st[2] = st[2] + 1
  redis.call('SET', KEYS[i], cmsgpack.pack(st), 'PXAT', st[6])
end
return 1`

// shortFloor is packedFloor with each subject a short string (the bucket,
// the window's sums, the expiry, the current and previous buckets' texts
// and approvals), parsed and rebuilt in Lua, all written by one MSET, and
// an expiry set only on new keys: the storage a leaner data model would
// cost, still without rule logic.
const shortFloor = `
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local cur = math.floor(now / 3600000)
local vals = redis.call('MGET', unpack(KEYS))
local out, fresh = {}, {}
for i = 1, #KEYS do
  local b, S, A, x, s0, s1, a0, a1
  if vals[i] then
    b, S, A, x, s0, s1, a0, a1 = string.match(vals[i], '(%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+)')
    b, S, A, x = tonumber(b), tonumber(S), tonumber(A), tonumber(x)
    s0, s1, a0, a1 = tonumber(s0), tonumber(s1), tonumber(a0), tonumber(a1)
  else
    b, S, A, x, s0, s1, a0, a1 = cur, 0, 0, now + 172800000, 0, 0, 0, 0
    fresh[#fresh + 1] = KEYS[i]
  end
  s0, S = s0 + 1, S + 1
  out[#out + 1] = KEYS[i]
  out[#out + 1] = b .. ' ' .. S .. ' ' .. A .. ' ' .. x .. ' ' .. s0 .. ' ' .. s1 .. ' ' .. a0 .. ' ' .. a1
end
redis.call('MSET', unpack(out))
for i = 1, #fresh do redis.call('PEXPIRE', fresh[i], 172800000) end
return 1`
