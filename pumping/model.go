package pumping

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The reference model of the pumping policy: the one place its rules are
// written as plain functions, and what TestMatchesReferenceModel holds
// decide.lua, approve.lua and release.lua to, step by step, on real Redis.
// A rule change is a change to this model, to its test and to the Lua, in
// step. It reads top to bottom as the answer to "why was this send
// refused?":
//
//  1. A send is decided over its subjects, in order (Guard.destination,
//     Guard.caller, Guard.spend): the phone's number ranges, its operator,
//     its country, the caller's networks, the spend ledger. The first
//     subject that refuses is the rule; what it refuses counts nowhere.
//  2. Every subject but the spend ledger has the same budget of unverified
//     texts (ledger.budget): floor + ratio * max(A, hour_factor * approvals
//     in the last hour, pk).
//  3. The kinds differ in what they count and whether they can be
//     restricted and take signs (modelKinds below).
//  4. An operator and its country count only the sends that carry no sign
//     of a real user (modelDecision.signs); over budget, they are
//     restricted for restrict_ms and then refuse only such sends. An
//     operator (p2 "…o") differs in two ways, both in unsigned: its
//     ledger of networks known abroad keeps only the hour's budget, and
//     its own hour's budget applies once it has learned a day.
//  5. A send that passes is counted in every subject (modelDecision.count)
//     and in the phone's record, which approve and release read
//     (model_approve.go).
//
// modelDecide is decide.lua as a pure function of the stored state (read
// and written through tx), the call (grp, a) and the clock: it returns the
// reply decide.lua gives, and tx holds its writes.

// modelKinds says what each kind of subject (decideSubject) does.
var modelKinds = map[string]struct {
	counts     string // what its budget counts
	restricted bool   // over budget, it is restricted for restrict_ms
	signs      bool   // a send with a sign of a real user passes it uncounted
}{
	"r": {"distinct numbers (a phone counted once in the window)", false, false},
	"c": {"distinct numbers texted without a sign of a real user", true, true},
	"n": {"texts (a free resend not)", false, false},
	"N": {"texts, and every text in its ledger of texts to the country", false, false},
	"m": {"money: the texts' prices in the last hour and the window", false, false},
}

// modelDecision is one decide call under way.
type modelDecision struct {
	tx  *modelTx
	c   modelClock
	a   decideArgs
	grp group
	// The phone's record (the destination group only).
	record                 string
	counted                bool // counted in the window (field h)
	verified               bool // approved since (v)
	recU, recK, recF       bool // what its count went to: the country (u), its challenge ledger (k), its foreign ledger (f)
	stale                  bool // u, k or f left from an older window
	resends                float64
	again, free            bool
	subjects               []*modelSubject
	signCached             bool
	sig, netSignal         string // the send's sign of a real user, the caller networks' signal
	rule                   int
	ru, rb, retry          float64
	near                   int
	nearU, nearB, nearRate float64
	unknown                bool
}

// modelSubject is one subject of the call, its ledgers and its decision.
type modelSubject struct {
	s              subject
	kind           string
	p1             float64
	p2             string
	l, sub, ch, fo *ledger
	chAdd          float64
	add            float64
	abroad         bool
	unknown        bool
	sig            string
	refuse, probed bool
	retry          float64
	u, budget      float64
	served         string
	price          float64
}

func modelNum(v any) float64 {
	f, err := strconv.ParseFloat(fmt.Sprint(v), 64)
	if err != nil {
		return math.NaN()
	}
	return f
}

func modelDecide(tx *modelTx, grp group, a decideArgs, now int64) decideReply {
	d := &modelDecision{tx: tx, c: newModelClock(now, ms(a.bucket), a.buckets), a: a, grp: grp, nearRate: 0.5}
	for i, s := range grp.subjects {
		ds := a.subjects[i]
		d.subjects = append(d.subjects, &modelSubject{s: s, kind: ds.kind, p1: modelNum(ds.p1), p2: fmt.Sprint(ds.p2)})
	}
	if a.record {
		d.readRecord()
	}
	for i, st := range d.subjects {
		d.load(i)
		switch {
		case st.kind == "m":
			d.money(i, st)
		case modelKinds[st.kind].restricted:
			d.restrictedSubject(st)
		default:
			d.counting(i, st)
		}
		if st.refuse && d.rule == 0 {
			d.rule, d.ru, d.rb, d.retry = i+1, st.u, st.budget, st.retry
		}
		if st.budget > 0 && st.u/st.budget >= d.nearRate {
			d.near, d.nearU, d.nearB, d.nearRate = i+1, st.u, st.budget, st.u/st.budget
		}
		// Enforced and refused: nothing will be counted, the rest need no look.
		if d.rule > 0 && a.mode != modeShadow {
			break
		}
	}
	signal := int64(-1)
	if a.signal == "" {
		signal = d.callerSignal()
	}
	reply := decideReply{rule: d.rule, used: floor(d.ru), budget: floor(d.rb), retry: msDuration(math.Ceil(d.retry)),
		near: d.near, nearUsed: floor(d.nearU), nearBudget: floor(d.nearB), bucket: d.c.cur, signal: signal}
	if d.rule > 0 && a.mode != modeShadow {
		st := d.subjects[d.rule-1]
		if st.kind == "c" {
			if d.unknown {
				// Cluster, the caller's signal not known: ask again with it.
				reply.verdict, reply.near, reply.nearUsed, reply.nearBudget = verdictAskAgain, 0, 0, 0
				return reply
			}
			d.writeRefusal(st)
		}
		reply.verdict = verdictRefused
		return reply
	}
	reply.verdict = verdictCounted
	if d.rule > 0 {
		reply.verdict = verdictShadow
	}
	reply.countryNew = d.count()
	d.writeRecord(reply.countryNew)
	switch {
	case d.record != "" && !d.counted:
		reply.recorded = 1
	case d.again:
		reply.recorded = 2
	}
	return reply
}

func floor(v float64) int64 { return int64(math.Floor(v)) }

// readRecord reads the phone's record: whether the number was counted in
// the window (h) and what its text counted in.
//
// again: the number was texted three times since it was counted or its
// code approved (field t); this text counts in the country as a new number
// would, and is no returning user's. A resend is free so that a user whose
// text is late is not counted twice; more than two are not, or a handful of
// numbers admitted once could be texted at the phone windows' pace from
// rotating networks at no rule's expense. The ranges keep counting a
// number once.
func (d *modelDecision) readRecord() {
	d.record = d.grp.record
	rec := d.record
	h, hasH := d.tx.num(rec, fieldRecBucket)
	d.counted = hasH && h >= float64(d.c.oldest)
	d.resends = d.tx.numOr(rec, fieldRecResends, 0)
	d.again = d.counted && d.resends >= 3
	_, d.verified = d.tx.hget(rec, fieldRecApproved)
	_, u := d.tx.hget(rec, fieldRecCountry)
	_, k := d.tx.hget(rec, fieldRecChallenge)
	_, f := d.tx.hget(rec, fieldRecForeign)
	d.recU, d.recK, d.recF = d.counted && u, d.counted && k, d.counted && f
	d.stale = !d.counted && (u || k || f)
	// A free resend in the call that holds the number's record: the
	// caller's networks' budgets do not count it either; their ledgers of
	// texts to the country, which make their sign, do.
	d.free = d.counted && !d.again
}

// load reads subject i's ledgers the first time it is needed: a country's
// decision reads the caller's networks before their own turn.
func (d *modelDecision) load(i int) *modelSubject {
	st := d.subjects[i]
	if st.l == nil {
		st.l = d.c.load(d.tx, st.s.key, st.kind != "m", st.kind)
		if st.kind == "N" {
			st.sub = d.c.load(d.tx, st.s.sub, false, "")
		}
	}
	return st
}

// counting decides a range or a network: its unverified texts against its
// budget. A phone already counted in a range is one of U, and so is a
// free resend in a network: refused only when over budget without it.
func (d *modelDecision) counting(i int, st *modelSubject) {
	l := st.l
	st.u = l.unverified()
	st.budget = l.budget(st.p1, d.a.ratio, d.a.hourFactor)
	need := st.u + 1
	if (st.kind == "r" && d.counted) || (d.free && (st.kind == "n" || st.kind == "N")) {
		need = st.u
	}
	st.refuse = need > st.budget && d.a.mode != modeBypass
	if probe := ms(d.a.probeEvery); st.refuse && st.kind != "r" && probe > 0 {
		// A network over its budget still admits one send every probe_ms,
		// counted from its first refusal: a shared address whose users do
		// verify earns its room back.
		if !l.hasPr {
			d.tx.hset(l.key, fieldProbed, d.c.now)
		} else if float64(d.c.now)-l.pr >= float64(probe) {
			st.refuse, st.probed = false, true
		}
	}
	// Only the first refusing rule's wait is worked out; shadow mode needs none.
	if st.refuse && d.rule == 0 && d.a.mode != modeShadow {
		st.retry = d.c.wait(d.tx, l.key, need, st.budget+1, l.b, false)
	}
}

// money decides the spend ledger: the hour's spend and the window's
// against their budgets (p2 "hour day", 0 none). A bypass pays it too.
func (d *modelDecision) money(i int, st *modelSubject) {
	l := st.l
	st.price = st.p1
	var hb, db float64
	fmt.Sscanf(st.p2, "%g %g", &hb, &db)
	hour := l.scur + l.sprev*(1-d.c.frac)
	switch {
	case hb > 0 && hour+st.price > hb:
		st.u, st.budget, st.refuse = hour, hb, true
		st.retry = float64((d.c.cur+1)*d.c.bucket - d.c.now)
	case db > 0 && l.S+st.price > db:
		st.u, st.budget, st.refuse = l.S, db, true
		if d.rule == 0 && d.a.mode != modeShadow {
			st.retry = d.c.wait(d.tx, l.key, l.S+st.price, db+1, l.b, true)
		}
	case db > 0:
		st.u, st.budget = l.S, db
	default:
		st.u, st.budget = hour, hb
	}
}

// countsIn says whether subject st counts this send (decide.lua's skip,
// negated): a range counts a number once, a network not a free resend, an
// operator or country only an unsigned send to a number it has not counted
// and from no network known abroad (that goes to its foreign ledger).
func (d *modelDecision) countsIn(st *modelSubject) bool {
	switch st.kind {
	case "r":
		return !d.counted
	case "n", "N":
		return !d.free
	case "c":
		return st.add != 0 && st.fo == nil
	}
	return true
}

// count counts the send everywhere and returns what the subjects that
// take signs counted (cnew bits: 1 the subject, 2 its challenge ledger, 4
// its foreign ledger); an operator and its country always count alike.
func (d *modelDecision) count() int64 {
	var cu, ck, cf bool
	for _, st := range d.subjects {
		add := 1.0
		if st.kind == "m" {
			add = st.price
		}
		in := d.countsIn(st)
		if in {
			st.l.count(add)
		}
		if st.kind == "c" && in {
			cu = true
		}
		if st.fo != nil && st.add == 1 {
			st.fo.count(1)
			cf = true
		}
		if st.fo != nil {
			d.c.store(d.tx, st.fo, st.add == 1, false, ledgerWrites(st.fo))
		}
		if st.ch != nil && st.chAdd == 1 {
			st.ch.count(1)
			d.c.store(d.tx, st.ch, true, false, nil)
			ck = true
		}
		// A restriction, tripped or renewed, is written with the counts.
		d.c.store(d.tx, st.l, in, st.probed, ledgerWrites(st.l))
		if st.sub != nil {
			// The network's ledger of texts to this country counts every
			// text: its users' resends are part of whether they verify.
			st.sub.count(1)
			d.c.store(d.tx, st.sub, true, false, nil)
		}
		if st.served != "" {
			d.tx.hincrby(st.l.key, st.served, 1)
		}
	}
	var bits int64
	if cu {
		bits |= 1
	}
	if ck {
		bits |= 2
	}
	if cf {
		bits |= 4
	}
	return bits
}

// writeRecord keeps the phone's record: the caller's network (an approval
// credits it), the resends, the first count's bucket, what the count went
// to, and w when a new code goes to a number already approved in the
// window (its approval is then the networks' to credit).
func (d *modelDecision) writeRecord(cnew int64) {
	if d.record == "" {
		return
	}
	rec := d.record
	f := []any{fieldRecNetwork, d.a.netid, fieldRecResends, d.resends + 1}
	if !d.counted {
		f[3] = 1.0
		f = append(f, fieldRecBucket, d.c.cur)
		if d.verified || d.stale {
			d.tx.hdel(rec, fieldRecApproved, fieldRecCountry, fieldRecOwed, fieldRecChallenge, fieldRecForeign)
		}
	}
	if cnew&1 != 0 {
		f = append(f, fieldRecCountry, 1)
	}
	if cnew&2 != 0 {
		f = append(f, fieldRecChallenge, 1)
	}
	if cnew&4 != 0 {
		f = append(f, fieldRecForeign, 1)
	}
	if d.counted && d.verified {
		f = append(f, fieldRecOwed, 1)
	}
	d.tx.hset(rec, f...)
	d.tx.pexpire(rec, d.c.window, d.c.now)
}

// String shows a ledger for a failing test's report.
func (l *ledger) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s S=%g A=%g pk=%g hour=%g uh=%g", l.key, l.S, l.A, l.pk, l.hour, l.uh)
	return b.String()
}
