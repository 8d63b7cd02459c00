package pumping

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// The subjects that can be restricted and take signs: an operator and its
// country (kind "c"). See model.go for the whole policy.

// signs is the send's sign of a real user, cheapest first, read once for
// every subject that takes signs (an operator, its country):
//
//	"c"  a solved challenge (mode bypass)
//	"r"  a returning number: it approved a code within the last
//	     returning days (its block's hash, field its last four digits);
//	     not a number resent past its free resends
//	"n"  an approving caller network: the caller networks' signal is 1
//	     (told, on Cluster, or read from this call's networks)
//	""   none: the send counts in the subject's budget
//
// and the caller networks' signal as read ("" when not read).
func (d *modelDecision) signs(st *modelSubject) (string, string) {
	if d.signCached {
		return d.sig, d.netSignal
	}
	sig, ns := "", ""
	if d.a.mode == modeBypass {
		sig = "c"
	} else {
		if d.a.returningDays > 0 && d.a.tail != "" && !d.again {
			day, ok := d.tx.num(st.s.ret, d.a.tail)
			if ok && day >= float64(d.c.now/86400000-d.a.returningDays) {
				sig = "r"
			}
		}
		if sig == "" {
			ns = d.a.signal
			if ns == "" {
				ns = strconv.FormatInt(d.callerSignal(), 10)
			}
			if ns == "1" {
				sig = "n"
			}
		}
	}
	d.signCached, d.sig, d.netSignal = true, sig, ns
	return sig, ns
}

// good says whether a network level's own codes to this country are
// approved: some approval, and at most as many texts unverified as
// approved over the window and over the last hour (a text of slack, two in
// the hour for codes still being typed).
func good(l *ledger) bool { return l.A >= 1 && l.S-l.A <= l.signBudget() && l.uh <= l.hour+2 }

// foreign says whether a network level is known for real users of other
// countries: at least two codes approved elsewhere, and more than twice as
// many as here.
func foreign(all, here *ledger) bool {
	elsewhere := all.A - here.A
	return elsewhere >= 2 && here.A*2 < elsewhere
}

// callerSignal is the caller networks' signal for the country: 2 when the
// widest level (an ISP's allocation) is known abroad, else 1 when a level
// is good and none bad, 0 when none is good, -1 with no signal level in
// this call.
func (d *modelDecision) callerSignal() int64 {
	var any, ok, bad, abroad bool
	for i, st := range d.subjects {
		if st.kind != "N" {
			continue
		}
		d.load(i)
		if !any && foreign(st.l, st.sub) {
			abroad = true
		}
		any = true
		if good(st.sub) {
			ok = true
		} else if st.sub.S-st.sub.A > st.sub.signBudget() {
			bad = true
		}
	}
	switch {
	case !any:
		return -1
	case abroad:
		return 2
	case ok && !bad:
		return 1
	}
	return 0
}

// restrictedSubject decides an operator or a country (p1 its floor, p2
// "1" when solved challenges are held to their ledger's budget).
func (d *modelDecision) restrictedSubject(st *modelSubject) {
	l, now := st.l, d.c.now
	restricted := l.restricted(now)
	sig, ns := d.signs(st)
	st.abroad, st.unknown, st.sig = ns == "2", ns == "?", sig
	st.u = l.unverified()
	st.budget = l.budget(st.p1, d.a.ratio, d.a.hourFactor)
	if sig == "c" {
		// A solved challenge passes, within the budget its own kind earns
		// when p2 says so: a solving farm's sends are not approved.
		ch := d.c.load(d.tx, st.s.challenged, true, "ch")
		st.ch = ch
		st.chAdd = 1
		if d.recK && !d.again {
			st.chAdd = 0
		}
		st.u = ch.unverified()
		st.budget = ch.budget(st.p1, d.a.ratio, d.a.hourFactor)
		if st.u+st.chAdd > st.budget && challengeBudgeted(st.p2) {
			st.refuse = true
			st.retry = d.c.wait(d.tx, st.s.challenged, st.u+st.chAdd, st.budget+1, ch.b, false)
		}
	}
	if sig != "" {
		// Signed: counted nowhere here; served while restricted is noted.
		st.add = 0
		if restricted && !st.refuse {
			st.served = servedFields[sig]
		}
		return
	}
	d.unsigned(st, restricted)
}

// challengeBudgeted says whether a "c" subject's p2 holds solved
// challenges to their ledger's budget (its first character "1").
func challengeBudgeted(p2 string) bool { return strings.HasPrefix(p2, "1") }

// isOperator says whether a "c" subject's p2 names an operator (its second
// character "o"), not a country.
func isOperator(p2 string) bool { return len(p2) > 1 && p2[1] == 'o' }

// unsigned decides a send with no sign of a real user against the ledger
// it counts in: the subject's own, or from a network known abroad its
// ledger of foreign networks, with a third of its floor, so a spread from
// proxies abroad restricts those networks and not the country's users.
//
// An operator's ledger of networks known abroad keeps only the short
// horizon (hourBudget): an operator's travellers are too few for a
// window's budget to learn, and with a floor of 1 one traveller who did
// not verify held it for the whole window, refusing every traveller after
// (who, refused, could never earn it room back). A spread from abroad
// still trips it within its first texts of the hour, and the country's
// own ledger of networks known abroad, which the operator's sends count in
// too, keeps the window's budget.
func (d *modelDecision) unsigned(st *modelSubject, restricted bool) {
	now := float64(d.c.now)
	led, lfloor := st.l, st.p1
	hourOnly := false
	if st.abroad {
		led = d.c.load(d.tx, st.s.foreign, true, "c")
		lfloor = math.Max(math.Floor(st.p1/3), 1)
		st.fo = led
		hourOnly = isOperator(st.p2)
	}
	lrestricted := led.restricted(d.c.now)
	// A resend to a number already counted is one of U.
	st.add = 1
	if (d.recU || d.recF) && !d.again {
		st.add = 0
	}
	add := st.add
	u := led.unverified()
	budget := led.budget(lfloor, d.a.ratio, d.a.hourFactor)
	wbudget := budget
	// The short horizon (hourBudget): a surge nobody verifies counts at once.
	bh := led.hourBudget(lfloor, d.a.ratio)
	if hourOnly {
		bh = led.travellersBudget(lfloor, d.a.ratio, d.c.nb)
	}
	over := u+add > budget && !hourOnly
	// An operator's own ledger has the short horizon once it has learned
	// a day (pk): before, a deployment's first day, approvals trail the
	// texts of a small operator by more than its floor, and the window's
	// budget (whose hour_factor term is the hour's approvals) holds it.
	short := !isOperator(st.p2) || st.abroad || led.pk > 0
	overh := short && led.uh+add > bh
	if (overh && !over) || hourOnly {
		u, budget = led.uh, bh
	}
	trip := over || overh
	restrictFor := float64(ms(d.a.restrictFor))
	if trip && st.abroad && !lrestricted {
		// Real travellers come in bursts: a ledger of networks known abroad
		// is restricted only at the third refusal within an hour.
		trip = d.refusedInHour(led) >= 3
	}
	if lrestricted && !st.abroad && (trip || add == 1) && !d.pressing(led) {
		// Its own ledger, restricted: a send it refuses renews it only
		// while the pressure that tripped it goes on, so real users alone,
		// refused once the attack stopped, do not hold it on.
		trip = false
	}
	if trip {
		f := []any{fieldRestrictedUntil, now + restrictFor}
		if !lrestricted {
			// The refusals that led to the trip are the restriction's.
			nq := 0.0
			if led.refusals != nil {
				nq = led.refusals[1].(float64) - 1
			}
			rh := 0.0
			if overh && !over {
				rh = 1
			}
			f = []any{fieldRestrictedUntil, now + restrictFor, fieldRestrictedSince, now, fieldTripUsed, math.Floor(u + add), fieldTripBudget, math.Floor(budget),
				fieldTripHour, rh, fieldTripWindow, math.Floor(wbudget), fieldRefused, nq, fieldServedReturning, 0.0, fieldServedNetwork, 0.0, fieldServedChallenge, 0.0,
				fieldPressureNow, 1.0, fieldPressureSince, now, fieldPressureLast, 0.0, fieldPressurePeak, 1.0}
		}
		led.trip = f
		led.rx, led.hasRx = now+restrictFor, true
		lrestricted = true
	} else if st.abroad && lrestricted && add == 1 {
		// Sends from abroad still arriving keep their ledger restricted
		// while the sends it refused within the hour are more than its
		// floor and twice the travellers' approvals of an average hour.
		if d.refusedInHour(led) > lfloor+d.a.ratio*2*led.A/float64(d.c.nb) {
			led.trip = []any{fieldRestrictedUntil, now + restrictFor}
			led.rx, led.hasRx = now+restrictFor, true
		}
	}
	st.u, st.budget = u, budget
	st.refuse = (over || overh || ((restricted || lrestricted) && add == 1)) && d.a.mode != modeBypass
	if st.refuse && d.a.mode != modeShadow {
		st.retry = math.Max(math.Max(rxOr0(st.l), rxOr0(led))-now, 1000)
		if !(restricted || lrestricted) {
			// Over budget, not restricted: the hour's counts move at the
			// next bucket.
			st.retry = float64((d.c.cur+1)*d.c.bucket - d.c.now)
		}
		if st.unknown {
			d.unknown = true
		}
	}
}

func rxOr0(l *ledger) float64 {
	if l.hasRx {
		return l.rx
	}
	return 0
}

// refusedInHour counts one more send a ledger of networks known abroad
// refused, within the hour since the first of them (fields oq, ot).
func (d *modelDecision) refusedInHour(led *ledger) float64 {
	oq, ot := d.tx.numOr(led.key, fieldAbroadRefused, 0), d.tx.numOr(led.key, fieldAbroadRefusedSince, 0)
	now := float64(d.c.now)
	if now-ot >= float64(d.c.bucket) {
		oq, ot = 0, now
	}
	oq++
	led.refusals = []any{fieldAbroadRefused, oq, fieldAbroadRefusedSince, ot}
	return oq
}

// pressing counts a send its own restricted ledger refuses in the
// ledger's current period (a sixth of a bucket: 10 minutes by default) and
// says whether the refusals still run at a quarter of their busiest period
// since the trip, this period's or the last's (fields pq, pt, pl, pp): the
// pressure that tripped it goes on. An attack refused at a hundred times
// the country's rate keeps its restriction; the country's own users,
// refused after it stopped, at a few a period, do not.
func (d *modelDecision) pressing(led *ledger) bool {
	pq, pt := d.tx.numOr(led.key, fieldPressureNow, 0), d.tx.numOr(led.key, fieldPressureSince, 0)
	pl, pp := d.tx.numOr(led.key, fieldPressureLast, 0), d.tx.numOr(led.key, fieldPressurePeak, 0)
	now, period := float64(d.c.now), math.Floor(float64(d.c.bucket)/6)
	switch {
	case now-pt >= 2*period:
		pq, pt, pl = 0, now, 0
	case now-pt >= period:
		pq, pt, pl = 0, pt+period, pq
	}
	pq++
	pp = math.Max(pp, pq)
	led.refusals = []any{fieldPressureNow, pq, fieldPressureSince, pt, fieldPressureLast, pl, fieldPressurePeak, pp}
	return math.Max(pq, pl)*4 >= pp
}

// ledgerWrites is what a send changed in a ledger besides its counts.
func ledgerWrites(led *ledger) []any {
	if led.refusals == nil {
		return led.trip
	}
	return append(append([]any{}, led.refusals...), led.trip...)
}

// writeRefusal writes what an enforced refusal by an operator or country
// keeps: each ledger's trip (or renewal), and the refusal, counted where
// the console reads it (the foreign ledger when it refused, not the
// subject's own restriction).
func (d *modelDecision) writeRefusal(st *modelSubject) {
	if w := ledgerWrites(st.l); w != nil {
		d.tx.hset(st.l.key, w...)
	}
	if st.fo != nil {
		if fw := ledgerWrites(st.fo); fw != nil {
			d.tx.hset(st.fo.key, fw...)
		}
	}
	led := st.l
	if st.fo != nil && !st.l.restricted(d.c.now) {
		led = st.fo
	}
	d.tx.hincrby(led.key, fieldRefused, 1)
	if led.isNew {
		// The refusal is all the key holds (a solved challenge refused by
		// its ledger's budget, say): it expires as a counted key does.
		d.tx.hset(led.key, fieldExpires, float64(d.c.now+d.c.keep()))
		d.tx.pexpire(led.key, d.c.keep(), d.c.now)
	}
}

func msDuration(v float64) time.Duration { return time.Duration(v) * time.Millisecond }
