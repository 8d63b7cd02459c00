package pumping

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/otp"
)

// modelHarness runs the same steps through the scripts on Redis and
// through the reference model, and compares them after each step.
type modelHarness struct {
	t       testing.TB
	rdb     *redis.Client
	prefix  string
	cluster bool
	cfg     Config
	scripts modelScripts
	g       *Guard // builds the calls, as the service does
	store   *modelStore
	now     int64
	phones  []otp.Phone
	ips     []netip.Addr
	// reservations are the sends counted and not released yet.
	reservations [][]modelCall
	// signals is what the caller's call last reported of its networks'
	// signal for a country (Cluster layout), as Guard.netSignal keeps it.
	signals map[string]string
	history []modelStep
	pending []*pendingStep
	steps   []int      // history index of each step that ran
	keysOf  [][]string // keys each step that ran touched
	touched map[string]bool
	seen    map[string]int
}

// modelCall is a counted call a release takes back.
type modelCall struct {
	grp                    group
	phone                  string
	bucket, recorded, cnew int64
}

// modelOp is one command of a step: a script call with the model's
// expected reply, or the expiry of keys.
type modelOp struct {
	name   string
	script *redis.Script // nil: DEL (an expiry)
	keys   []string
	args   []any
	want   any
	writes []string // the model's, for the report
}

var modelT0 = time.Date(2026, 3, 2, 10, 17, 3, 0, time.UTC).UnixMilli()

// modelScripts are the scripts a harness holds to the model: the
// package's (packageScripts), or a mutant's (mutants_test.go). Only tests
// make other ones; the service runs the embedded files.
type modelScripts struct{ decide, approve, release *redis.Script }

func packageScripts() modelScripts { return modelScripts{decideScript, approveScript, releaseScript} }

func newModelHarness(t testing.TB, rdb *redis.Client, prefix string, cluster bool, cfg Config) *modelHarness {
	return newModelHarnessWith(t, rdb, prefix, cluster, cfg, packageScripts())
}

// newModelHarnessWith is newModelHarness running the given scripts.
func newModelHarnessWith(t testing.TB, rdb *redis.Client, prefix string, cluster bool, cfg Config, scripts modelScripts) *modelHarness {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	rdb = modelClient(t, rdb)
	h := &modelHarness{t: t, rdb: rdb, prefix: prefix, cluster: cluster, cfg: cfg, scripts: scripts, store: newModelStore(), now: modelT0,
		phones: modelPhones(), signals: map[string]string{}, touched: map[string]bool{}, seen: map[string]int{}}
	for _, s := range modelIPs {
		a, _ := netip.ParseAddr(s) // "" is no address: no caller group
		h.ips = append(h.ips, a)
	}
	h.g = New(rdb, prefix, cfg, Options{Cluster: cluster, Clock: func(context.Context) time.Time { return time.UnixMilli(h.now) }})
	for _, s := range []*redis.Script{scripts.decide, scripts.approve, scripts.release, modelDump} {
		if err := s.Load(context.Background(), rdb).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// modelClient is rdb, or a client of the same server that runs a
// pipeline once: go-redis sends a pipeline again when its reply times out
// (ReadTimeout, 3 s by default), and a batch of steps that ran twice on a
// loaded machine made Redis differ from the model at a step that did
// nothing wrong (a new number's record already there).
func modelClient(t testing.TB, rdb *redis.Client) *redis.Client {
	o := rdb.Options()
	if o.MaxRetries == -1 && o.ReadTimeout >= time.Minute {
		return rdb
	}
	opt := *o
	opt.MaxRetries, opt.ReadTimeout, opt.WriteTimeout = -1, 2*time.Minute, 2*time.Minute
	c := redis.NewClient(&opt)
	t.Cleanup(func() { c.Close() })
	return c
}

func (h *modelHarness) clock() modelClock {
	return newModelClock(h.now, ms(bucket), int64(h.cfg.Window/bucket))
}

// step runs one step in the model and queues it for Redis: steps go in
// batches of modelBatch, each one round trip that interleaves their
// commands with the reads of the keys each touched.
func (h *modelHarness) step(s modelStep) {
	h.history = append(h.history, s)
	var ops []*modelOp
	switch s.kind {
	case 't':
		h.now += s.n
		for _, k := range h.store.expire(h.now) {
			ops = append(ops, &modelOp{name: "expire", keys: []string{k}})
		}
	case 's':
		for _, e := range h.edges(s) {
			h.seen["edge "+e]++
		}
		ops = h.send(s)
	case 'a':
		ops = h.approve(s)
	case 'r':
		ops = h.release(s)
	}
	if len(ops) == 0 {
		return
	}
	p := &pendingStep{idx: len(h.history) - 1, ops: ops}
	keys := map[string]bool{}
	for _, op := range ops {
		for _, k := range op.keys {
			keys[k], h.touched[k] = true, true
		}
		h.cover(op)
	}
	p.keys = slices.Sorted(maps.Keys(keys))
	for _, k := range p.keys {
		_, exp := h.store.expires[k]
		// A committed hash is never changed in place (modelTx copies it
		// first), so the expectation needs no copy.
		p.want, p.expires = append(p.want, h.store.hashes[k]), append(p.expires, exp)
	}
	h.pending = append(h.pending, p)
	if len(h.pending) >= modelBatch {
		h.flush()
	}
}

// modelBatch is how many steps share a round trip: on a loaded machine
// the round trip, not Redis or the model, is what a step costs.
const modelBatch = 128

// pendingStep is a step the model ran and Redis has yet to.
type pendingStep struct {
	idx     int
	ops     []*modelOp
	keys    []string
	want    []map[string]string
	expires []bool
	cmds    []redis.Cmder
	dump    *redis.Cmd
}

// flush runs the queued steps on Redis and compares each with the model,
// stopping at the first that differs.
func (h *modelHarness) flush() {
	if len(h.pending) == 0 {
		return
	}
	ctx := context.Background()
	pipe := h.rdb.Pipeline()
	for _, p := range h.pending {
		for _, op := range p.ops {
			if op.script == nil {
				p.cmds = append(p.cmds, pipe.Del(ctx, op.keys...))
			} else {
				p.cmds = append(p.cmds, pipe.EvalSha(ctx, op.script.Hash(), op.keys, op.args...))
			}
		}
		p.dump = pipe.EvalSha(ctx, modelDump.Hash(), p.keys)
	}
	_, _ = pipe.Exec(ctx)
	pending := h.pending
	h.pending = nil
	for _, p := range pending {
		h.steps, h.keysOf = append(h.steps, p.idx), append(h.keysOf, p.keys)
		if !h.check(p) {
			return
		}
	}
}

// check compares one step's replies and keys with the model's.
func (h *modelHarness) check(p *pendingStep) bool {
	for i, op := range p.ops {
		if op.script == nil {
			continue
		}
		got, err := p.cmds[i].(*redis.Cmd).Result()
		if err != nil {
			h.fail(p, op, "script error: %v", err)
			return false
		}
		if msg := h.compareReply(op, got); msg != "" {
			h.fail(p, op, "%s", msg)
			return false
		}
	}
	dump, err := p.dump.Text()
	if err != nil {
		h.t.Fatal(err)
	}
	for i, k := range p.keys {
		var got map[string]string
		var ttl int64
		got, ttl, dump = readDump(dump, k)
		if (len(got) > 0 || len(p.want[i]) > 0) && !maps.Equal(got, p.want[i]) {
			h.fail(p, p.ops[0], "key %s:\n  redis %s\n  model %s", k, showHash(got), showHash(p.want[i]))
			return false
		}
		if len(got) > 0 && p.expires[i] != (ttl >= 0) {
			h.fail(p, p.ops[0], "key %s: redis PTTL %d, model expires %v", k, ttl, p.expires[i])
			return false
		}
	}
	return true
}

// modelDump reads keys in one reply, one string: per key its name, its
// PTTL, its number of fields and its fields and values, each ended by a
// zero byte (no name, field or value of the scripts' has one). One string
// is far cheaper to read than a map per key.
var modelDump = redis.NewScript(`
local out = {}
for _, k in ipairs(KEYS) do
  local h = redis.call('HGETALL', k)
  out[#out + 1] = k
  out[#out + 1] = redis.call('PTTL', k)
  out[#out + 1] = #h / 2
  for i = 1, #h do out[#out + 1] = h[i] end
end
out[#out + 1] = ''
return table.concat(out, '\0')`)

// readDump reads key's part of a modelDump reply and returns the rest.
func readDump(dump, key string) (map[string]string, int64, string) {
	next := func() string {
		v, rest, _ := strings.Cut(dump, "\x00")
		dump = rest
		return v
	}
	if k := next(); k != key {
		return map[string]string{"(dump out of step)": k}, 0, dump
	}
	ttl, _ := strconv.ParseInt(next(), 10, 64)
	n, _ := strconv.Atoi(next())
	h := make(map[string]string, n)
	for range n {
		f := next()
		h[f] = next()
	}
	return h, ttl, dump
}

// cover counts what the model's writes show a step exercised.
func (h *modelHarness) cover(op *modelOp) {
	if r, ok := op.want.(decideReply); ok {
		h.seen[fmt.Sprintf("verdict%d", r.verdict)]++
	}
	for _, w := range op.writes {
		switch {
		case strings.HasPrefix(w, "PTTL"):
			// Redis's PTTL is on its clock, the test's now is not: a step
			// that asks it cannot be checked (model_store.go, pttl).
			h.t.Errorf("%s: %s asked PTTL of a key with an expiry and no field %s", op.name, w, fieldExpires)
		case strings.HasPrefix(w, "HINCRBY"):
			if i := strings.LastIndexByte(w[:len(w)-2], ' '); i > 0 {
				h.seen["HINCRBY"+w[i:len(w)-2]]++ // nq, nr, nn, nc, s<x>, S
			}
		case !strings.HasPrefix(w, "HSET"):
		case strings.Contains(w, " rs "):
			h.seen["tripped"]++
		case strings.Contains(w, " rx "):
			h.seen["restriction renewed"]++
		case strings.Contains(w, " oq "):
			h.seen["refused abroad"]++
		case strings.Contains(w, " pr "):
			h.seen["probe"]++
		case strings.Contains(w, ":cc "):
			h.seen["challenge ledger"]++
		case strings.Contains(w, ":cf "):
			h.seen["foreign ledger"]++
		}
	}
}

// compareReply reads a script's reply as the service does and compares it
// with the model's.
func (h *modelHarness) compareReply(op *modelOp, got any) string {
	switch want := op.want.(type) {
	case decideReply:
		r, err := parseDecideReply(got, (len(op.args)-(decideArgSubjects-1))/3)
		if err != nil {
			return err.Error()
		}
		if r != want {
			return fmt.Sprintf("reply\n  redis %+v\n  model %+v", r, want)
		}
	default:
		if !reflect.DeepEqual(got, want) {
			return fmt.Sprintf("reply\n  redis %#v\n  model %#v", got, want)
		}
	}
	return ""
}

func showHash(m map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "%s=%s ", k, m[k])
	}
	return b.String()
}

// fail reports the failing step with the steps before it that touched its
// keys: the sequence that led there, without the rest.
func (h *modelHarness) fail(p *pendingStep, op *modelOp, format string, args ...any) {
	h.t.Helper()
	last := len(h.keysOf) - 1
	mine := map[string]bool{}
	for _, k := range h.keysOf[last] {
		mine[k] = true
	}
	var b strings.Builder
	fmt.Fprintf(&b, "step %d (%s), %s: %s\n", p.idx, h.history[p.idx], op.name, fmt.Sprintf(format, args...))
	fmt.Fprintf(&b, "config %+v\nthe earlier steps on its keys:\n", h.cfg)
	for i, idx := range h.steps[:last] {
		if slices.ContainsFunc(h.keysOf[i], func(k string) bool { return mine[k] }) {
			fmt.Fprintf(&b, "  step %d: %s\n", idx, h.history[idx])
		}
	}
	fmt.Fprintf(&b, "the model's writes:\n  %s", strings.Join(op.writes, "\n  "))
	h.t.Error(b.String())
}

// decideOp is a decide.lua call of grp, and the model's reply to it.
func (h *modelHarness) decideOp(grp group, p otp.Phone, netid string, mode decideMode, signal string) (*modelOp, decideReply) {
	a := h.g.decideArgs(context.Background(), grp, p, netid, mode, signal)
	tx := h.store.begin()
	want := modelDecide(tx, grp, a, h.now)
	tx.commit()
	return &modelOp{name: "decide signal=" + strconv.Quote(signal), script: h.scripts.decide, keys: grp.keys(), args: a.argv(),
		want: want, writes: tx.log}, want
}

// send decides a send as Reserve does: one call (one primary), or one
// call per hash tag with the destination told the caller's signal as
// remembered, asking again when it must, and a refusal or a free resend
// giving back what the other calls counted (Guard.conclude).
func (h *modelHarness) send(s modelStep) []*modelOp {
	p, ip := h.phones[s.phone], h.ips[s.ip]
	groups := h.g.groups(p, ip)
	mode, netid := h.g.mode(s.bypass), networkID(ip)
	if !h.cluster {
		groups = []group{merge(groups)}
	}
	var ops []*modelOp
	replies := make([]decideReply, len(groups))
	sigKey := signalKey(ip) + " " + countryOf(p)
	for i, grp := range groups {
		signal := ""
		if h.cluster && len(groups) > 1 && grp.record != "" {
			remembered := h.signals[sigKey]
			if remembered == "" {
				remembered = "?"
			}
			signal = []string{remembered, remembered, remembered, "?", "0", "1", "2"}[s.sig]
		}
		var op *modelOp
		op, replies[i] = h.decideOp(grp, p, netid, mode, signal)
		ops = append(ops, op)
	}
	sig := int64(-1)
	for i, grp := range groups {
		if grp.record == "" && replies[i].signal >= 0 {
			sig = replies[i].signal
			h.signals[sigKey] = signalArg(sig)
		}
	}
	for i, grp := range groups {
		if replies[i].verdict == verdictAskAgain {
			var op *modelOp
			op, replies[i] = h.decideOp(grp, p, netid, mode, signalArg(sig))
			ops = append(ops, op)
		}
	}
	var counted []modelCall
	refused, free := false, false
	for i, grp := range groups {
		r := replies[i]
		if !r.verdict.counted() {
			refused = true
			continue
		}
		counted = append(counted, modelCall{grp, p.E164, r.bucket, r.recorded, r.countryNew})
		free = free || (grp.record != "" && r.recorded == 0)
	}
	if refused {
		return append(ops, h.releaseOps(counted)...)
	}
	if free {
		var kept, back []modelCall
		for _, c := range counted {
			if c.grp.record == "" && c.grp.networks() {
				c.recorded = freeResendNetworks
				back = append(back, c)
			} else {
				kept = append(kept, c)
			}
		}
		ops, counted = append(ops, h.releaseOps(back)...), kept
	}
	if len(counted) > 0 {
		h.reservations = append(h.reservations, counted)
	}
	return ops
}

// releaseOps take back counted calls, as Guard.Release does.
func (h *modelHarness) releaseOps(calls []modelCall) []*modelOp {
	var ops []*modelOp
	for _, c := range calls {
		args := []any{c.bucket, c.phone, c.recorded, flag(c.grp.record != ""), len(c.grp.subjects)}
		for _, s := range c.grp.subjects {
			amount := s.price
			if s.kind == 'c' {
				amount = c.cnew
			}
			args = append(args, s.arg(), amount)
		}
		tx := h.store.begin()
		modelRelease(tx, c.grp, c.bucket, c.recorded, c.cnew)
		tx.commit()
		ops = append(ops, &modelOp{name: fmt.Sprintf("release recorded=%d cnew=%d", c.recorded, c.cnew),
			script: h.scripts.release, keys: c.grp.keys(), args: args, want: int64(1), writes: tx.log})
		h.seen["release"]++
	}
	return ops
}

func (h *modelHarness) release(s modelStep) []*modelOp {
	if len(h.reservations) == 0 {
		return nil
	}
	i := int(s.n) % len(h.reservations)
	r := h.reservations[i]
	h.reservations = slices.Delete(h.reservations, i, i+1)
	return h.releaseOps(r)
}

// approve credits an approved code as Guard.Approved does: the
// destination, then the networks its record names.
func (h *modelHarness) approve(s modelStep) []*modelOp {
	p := h.phones[s.phone]
	d := h.g.destination(p)
	_, tail := returningBlock(p)
	keys, signed := h.g.approvalKeys(d)
	keep := ms(h.cfg.ReturningFor)
	args := []any{h.now, ms(bucket), int64(h.cfg.Window / bucket), p.E164, "d",
		tail + " " + strconv.FormatInt(keep, 10) + " " + strconv.Itoa(signed)}
	tx := h.store.begin()
	credited, netid := modelApprove(tx, d, h.clock(), tail, keep)
	tx.commit()
	want := []any{int64(0), ""}
	if credited {
		want[0] = int64(1)
		want[1] = netid
		h.seen["approved"]++
	}
	ops := []*modelOp{{name: "approve", script: h.scripts.approve, keys: keys, args: args, want: want, writes: tx.log}}
	ip, err := netip.ParseAddr(netid)
	if !credited || err != nil {
		return ops
	}
	c := h.g.caller(ip, countryOf(p))
	if len(c.subjects) == 0 {
		return ops
	}
	nargs := slices.Clone(args)
	nargs[4] = "n"
	tx = h.store.begin()
	modelApproveNetworks(tx, c.keys(), h.clock())
	tx.commit()
	return append(ops, &modelOp{name: "approve networks", script: h.scripts.approve, keys: c.keys(), args: nargs,
		want: []any{int64(1), ""}, writes: tx.log})
}

// checkAll compares every key of the run, not only the last step's.
func (h *modelHarness) checkAll() {
	ctx := context.Background()
	var keys []string
	iter := h.rdb.Scan(ctx, 0, h.prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		if strings.Contains(iter.Val(), ":pump:{d:") || strings.Contains(iter.Val(), ":pump:{n:") || strings.Contains(iter.Val(), ":pump:{spend}") {
			keys = append(keys, iter.Val())
		}
	}
	if err := iter.Err(); err != nil {
		h.t.Fatal(err)
	}
	slices.Sort(keys)
	want := slices.Sorted(maps.Keys(h.store.hashes))
	if !slices.Equal(keys, want) {
		h.t.Errorf("keys differ:\n  redis %v\n  model %v", keys, want)
	}
	for _, k := range keys {
		got, err := h.rdb.HGetAll(ctx, k).Result()
		if err != nil {
			h.t.Fatal(err)
		}
		if !maps.Equal(got, h.store.hashes[k]) {
			h.t.Errorf("key %s:\n  redis %s\n  model %s", k, showHash(got), showHash(h.store.hashes[k]))
		}
	}
}

// cleanup deletes every key the run touched.
func (h *modelHarness) cleanup() {
	keys := slices.Collect(maps.Keys(h.touched))
	for len(keys) > 0 {
		n := min(len(keys), 500)
		if err := h.rdb.Unlink(context.Background(), keys[:n]...).Err(); err != nil {
			h.t.Errorf("deleting the run's keys: %v", err)
			return
		}
		keys = keys[n:]
	}
}

// edges names the edges of the rules' comparisons that send s, made now,
// exercises: where one comparison of decide.lua written otherwise (a
// mutant of mutants_test.go, named in each case) would decide it
// otherwise. The model runs the send on the merged group (one primary)
// without keeping anything; a comparison of a stored time is tried
// again with the time a millisecond later, which is what the other
// comparison does at its edge, and the send exercises the edge when
// anything of the call (reply or writes) differs. TestMatchesReferenceModel
// counts them (logCoverage) and modelGen aims at them.
func (h *modelHarness) edges(s modelStep) []string {
	_, out := h.examine(s, false)
	return out
}

// try is the model's reply to send s made now, kept nowhere, and the
// edges it exercises (edges).
func (h *modelHarness) try(s modelStep) (decideReply, []string) { return h.examine(s, true) }

// examine is try; without reply, it runs the model only when a stored
// field or count is at an edge (the model is most of a step's work under
// -race).
func (h *modelHarness) examine(s modelStep, reply bool) (decideReply, []string) {
	if s.kind != 's' {
		return decideReply{}, nil
	}
	p, ip := h.phones[s.phone], h.ips[s.ip]
	grp := merge(h.g.groups(p, ip))
	a := h.g.decideArgs(context.Background(), grp, p, networkID(ip), h.g.mode(s.bypass), "")
	run := func(key, field string, v float64) (decideReply, string) {
		tx := h.store.begin()
		if key != "" {
			tx.hset(key, field, v)
			tx.log = nil
		}
		r := modelDecide(tx, grp, a, h.now)
		return r, strings.Join(tx.log, "\n")
	}
	var r0 decideReply
	var log0 string
	ran := false
	base := func() {
		if !ran {
			r0, log0 = run("", "", 0)
			ran = true
		}
	}
	var out []string
	// stored is a stored time of key at its edge: d before now.
	stored := func(key, field string, d int64) (float64, bool) {
		v, ok := h.store.hashes[key][field]
		if !ok || d <= 0 {
			return 0, false
		}
		x, err := strconv.ParseFloat(v, 64)
		return x, err == nil && int64(x) == h.now-d
	}
	moved := func(name, key, field string, d int64) {
		if x, ok := stored(key, field, d); ok && !slices.Contains(out, name) {
			base()
			if r, log := run(key, field, x+1); r != r0 || log != log0 {
				out = append(out, name)
			}
		}
	}
	clock := h.clock()
	for i, sb := range grp.subjects {
		switch sb.kind {
		case 'n':
			moved("probe", sb.key, fieldProbed, ms(h.cfg.ProbeEvery)) // network-probe-ge-gt
		case 'c':
			for _, k := range []string{sb.key, sb.foreign} {
				moved("held", k, fieldRestrictedSince, clock.window) // held-window-lt-le
			}
			moved("abroad-hour", sb.foreign, fieldAbroadRefusedSince, clock.bucket) // abroad-hour-ge-gt
			// A renewal (a refusal counted in the hour while the ledger
			// is restricted) whose count is at twice the travellers'
			// average hour (abroad-renew-gt-ge) or past it, not past
			// three times (abroad-renew-twice).
			// (A renewal that writes the end the ledger has changes nothing.)
			rx, err := strconv.ParseFloat(h.store.hashes[sb.foreign][fieldRestrictedUntil], 64)
			if err != nil || rx <= float64(h.now) || rx == float64(h.now+ms(h.cfg.RestrictFor)) {
				continue
			}
			led := clock.load(h.store.begin(), sb.foreign, true, "c")
			lfloor := math.Max(math.Floor(float64(sb.floor)/3), 1)
			two := lfloor + a.ratio*2*led.A/float64(clock.nb)
			three := lfloor + a.ratio*3*led.A/float64(clock.nb)
			// The count this refusal would make (refusedInHour).
			q := 1.0
			if ot, ok := h.store.hashes[sb.foreign][fieldAbroadRefusedSince]; ok {
				if x, _ := strconv.ParseFloat(ot, 64); float64(h.now)-x < float64(clock.bucket) {
					n, _ := strconv.ParseFloat(h.store.hashes[sb.foreign][fieldAbroadRefused], 64)
					q = n + 1
				}
			}
			name := ""
			switch {
			case q == two:
				name = "renew-at"
			case q > two && q <= three:
				name = "renew-twice"
			}
			if name == "" {
				continue
			}
			// The send makes it: a renewal of this ledger (refusedInHour
			// is called on a restricted ledger only there), written.
			base()
			if w, ok := writtenField(log0, sb.foreign, fieldAbroadRefused); ok && w == q {
				out = append(out, name)
			}
		case 'm':
			// The hour's spend lands on its budget (money-hour-gt-ge).
			hb := float64(micros(h.cfg.Spend.Hour))
			if hb == 0 {
				continue
			}
			if l := clock.load(h.store.begin(), sb.key, false, ""); l.scur+l.sprev*(1-clock.frac)+float64(sb.price) != hb {
				continue
			}
			if base(); r0.rule == 0 || r0.rule == i+1 {
				out = append(out, "money-hour")
			}
		}
	}
	if reply {
		base()
	}
	return r0, out
}

// writtenField is the value the log's last HSET of key wrote to field.
func writtenField(log, key, field string) (float64, bool) {
	var v float64
	found := false
	for _, line := range strings.Split(log, "\n") {
		rest, ok := strings.CutPrefix(line, "HSET "+key+" ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		for i := 0; i+1 < len(f); i += 2 {
			if f[i] == field {
				v, _ = strconv.ParseFloat(f[i+1], 64)
				found = true
			}
		}
	}
	return v, found
}
