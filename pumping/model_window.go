package pumping

import (
	"math"
	"strconv"
	"strings"
)

// modelClock is one script call's time, in the units the rules count in:
// a window of nb buckets of bucket ms (24 one-hour buckets by default).
type modelClock struct {
	now, bucket, nb int64
	cur             int64   // the current bucket
	oldest          int64   // the oldest bucket still inside the window
	day             int64   // the window-long "day" approvals are kept by
	frac            float64 // how far into the current bucket now is
	window          int64   // bucket * nb, ms
}

func newModelClock(now, bucket, nb int64) modelClock {
	cur := now / bucket
	return modelClock{now: now, bucket: bucket, nb: nb, cur: cur, oldest: cur - nb + 1, day: cur / nb,
		frac: float64(now%bucket) / float64(bucket), window: bucket * nb}
}

// keep is how long a subject keeps its counts past its last send: two
// windows.
func (c modelClock) keep() int64 { return 2 * c.window }

// learnedKeep is how long an approval keeps a subject: its baseline looks
// back 14 windows.
func (c modelClock) learnedKeep() int64 { return 15 * c.window }

func sField(x int64) string { return fieldTextsIn + strconv.FormatInt(x, 10) }
func aField(x int64) string { return fieldApprovedIn + strconv.FormatInt(x, 10) }
func dField(x int64) string { return fieldApprovedOn + strconv.FormatInt(x, 10) }

// ledger is one subject's hash as a send reads it: a count of texts and
// approvals over the window, by bucket.
//
//	b        the oldest bucket still inside the window
//	S, A     the window's sums: texts counted, codes approved
//	s<x>     texts counted in bucket x; a<x> codes approved in bucket x
//	d<day>   codes approved in window-long "day" day
//	pk, pd   the largest d over the 14 days before pd (the learned baseline)
//	x        when the key expires, as the scripts last set it
//	pr       a network's first refusal or last probe (see decide)
//	rx       a restricted subject's end of restriction (see decide)
//	rs, rw   when its last restriction began, and the window's budget then
type ledger struct {
	key                    string
	S, A, pk               float64
	scur, sprev            float64 // this bucket's texts, the previous one's
	hour                   float64 // approvals in the last hour
	uh                     float64 // unverified texts of the last hour
	b                      float64
	x                      float64
	hasX, isNew            bool
	rx, pr                 float64
	held                   float64 // the window's budget a trip holds (rw), 0 when none
	restrictable, probable bool    // rx, pr were read (and set: hasRx, hasPr)
	hasRx, hasPr           bool
	// A restricted subject's writes of this send besides its counts
	// (ledgerWrites): its restriction tripped or renewed (trip), and its
	// refusals counted (refusals): abroad in the hour (oq, ot), its own
	// while restricted per period (pq, pt, pl, pp).
	trip, refusals []any
}

// unverified is U = S - A, never below 0.
func (l *ledger) unverified() float64 { return math.Max(l.S-l.A, 0) }

// budget is the formula every counting subject shares:
//
//	floor + ratio * max(A, hour_factor * approvals in the last hour, pk)
//
// so a subject whose codes are approved earns room in proportion, a quiet
// one keeps its cold-start floor, and one with weeks of history keeps its
// learned room through a slow hour.
//
// A restricted subject keeps, for a window from its trip, at least the
// window's budget it had then (held): its refusals stop the approvals that
// earned it, and the hour's term, falling, would otherwise keep it
// restricted until the attack's texts leave the window (a launch day's
// country, whose room is mostly the hour's, refused its new users all day).
func (l *ledger) budget(floor, ratio, hourFactor float64) float64 {
	return max(floor+ratio*max(l.A, hourFactor*l.hour, l.pk), l.held)
}

// hourBudget is the short horizon of a restricted subject's budget: its
// unverified texts of the last hour at most
//
//	floor + ratio * approvals in the last hour
//
// so a surge nobody verifies counts at once.
func (l *ledger) hourBudget(floor, ratio float64) float64 { return floor + ratio*l.hour }

// travellersBudget is the hour's budget of an operator's ledger of
// networks known abroad, which keeps no window's: its floor plus the
// approvals of the last hour or, when more, of its average hour over the
// window rounded up,
//
//	floor + max(ratio * approvals in the last hour, ceil(ratio * A / nb))
//
// so an operator whose travellers verify through the day keeps room for
// one who does not: with the floor alone (1), one traveller who did not
// verify refused every other traveller to that operator for the hour.
func (l *ledger) travellersBudget(floor, ratio float64, nb int64) float64 {
	return floor + math.Max(ratio*l.hour, math.Ceil(ratio*l.A/float64(nb)))
}

// signBudget is what keeps a network level's sign of a real user (good,
// callerSignal): its texts to a country unverified over the window at most
// its approvals + 1.
func (l *ledger) signBudget() float64 { return l.A + 1 }

// restricted says whether the subject's restriction runs at now.
func (l *ledger) restricted(now int64) bool { return l.hasRx && l.rx > float64(now) }

// load reads a subject and moves its window to now, dropping the buckets
// that left it (decide.lua's load). learn: the subject keeps a learned
// baseline, refreshed once a day; kind picks the extra field it reads
// ("c" and the foreign ledger: rx; "n", "N": pr).
func (c modelClock) load(tx *modelTx, key string, learn bool, kind string) *ledger {
	h := func(f string) (float64, bool) { return tx.num(key, f) }
	or0 := func(f string) float64 { v, _ := h(f); return v }
	l := &ledger{key: key, S: or0(fieldTexts), A: or0(fieldApproved), scur: or0(sField(c.cur)), sprev: or0(sField(c.cur - 1))}
	aCur, aPrev := or0(aField(c.cur)), or0(aField(c.cur-1))
	l.x, l.hasX = h(fieldExpires)
	b, hasB := h(fieldOldest)
	l.isNew = !hasB
	if learn {
		l.pk = or0(fieldPeak)
		switch kind {
		case "c":
			l.restrictable = true
			l.rx, l.hasRx = h(fieldRestrictedUntil)
			rs, hasRs := h(fieldRestrictedSince)
			if rw, ok := h(fieldTripWindow); ok && hasRs && float64(c.now)-rs < float64(c.window) {
				l.held = rw
			}
		case "n", "N":
			l.probable = true
			l.pr, l.hasPr = h(fieldProbed)
		}
	}
	pd, hasPd := h(fieldPeakDay)
	oldest := float64(c.oldest)
	switch {
	case !hasB:
		b = oldest
	case b < oldest:
		if oldest-b >= float64(c.nb) {
			// Every bucket the window had left it, but approve, which does
			// not move the window, may have counted an approval since: the
			// buckets still inside are kept and summed.
			var stale []string
			l.S, l.A = 0, 0
			for _, f := range tx.hkeys(key) {
				n, texts := strings.CutPrefix(f, fieldTextsIn)
				if !texts {
					var ok bool
					if n, ok = strings.CutPrefix(f, fieldApprovedIn); !ok {
						continue
					}
				}
				x, _ := strconv.ParseInt(n, 10, 64)
				switch {
				case x < c.oldest:
					stale = append(stale, f)
				case texts:
					l.S += tx.numOr(key, f, 0)
				default:
					l.A += tx.numOr(key, f, 0)
				}
			}
			if len(stale) > 0 {
				tx.hdel(key, stale...)
			}
			if c.cur-1 < c.oldest {
				l.sprev = 0 // a one-bucket window
			}
		} else {
			for x := int64(b); x <= c.oldest-1; x++ {
				l.S -= tx.numOr(key, sField(x), 0)
				l.A -= tx.numOr(key, aField(x), 0)
				if x == c.cur-1 {
					l.sprev = 0 // a one-bucket window
				}
				tx.hdel(key, sField(x), aField(x))
			}
		}
		b = oldest
		tx.hset(key, fieldOldest, b, fieldTexts, l.S, fieldApproved, l.A)
	}
	if learn && (!hasPd || pd != float64(c.day)) && hasB {
		var pk float64
		for d := c.day - 14; d <= c.day-1; d++ {
			pk = math.Max(pk, tx.numOr(key, dField(d), 0))
		}
		tx.hdel(key, dField(c.day-15))
		tx.hset(key, fieldPeak, pk, fieldPeakDay, c.day)
		l.pk = pk
	}
	// The hour's approvals are the bucket's and what of the previous one
	// is still inside the hour; read before the window moved.
	l.hour = aCur + aPrev*(1-c.frac)
	l.uh = math.Max(l.scur+l.sprev*(1-c.frac)-l.hour, 0)
	l.b = b
	return l
}

// count adds n texts to the current bucket.
func (l *ledger) count(n float64) { l.scur, l.S = l.scur+n, l.S+n }

// store writes what a send changed in a subject (decide.lua's store): its
// counts when counted, a probe's time, extra fields (a restriction), and a
// new expiry when the key would outlive its window by less than keep -
// bucket (approve's longer expiry is never shortened).
func (c modelClock) store(tx *modelTx, l *ledger, counted, probed bool, extra []any) {
	f := extra
	if counted {
		f = append(f, sField(c.cur), l.scur, fieldTexts, l.S, fieldOldest, l.b)
	}
	if probed {
		f = append(f, fieldProbed, c.now)
	}
	x, hasX := l.x, l.hasX
	if !hasX && !l.isNew {
		// Written before expiries were kept in the hash: ask once.
		if ttl := tx.pttl(l.key, c.now); ttl > 0 {
			x, hasX = float64(c.now+ttl), true
		}
	}
	if len(f) == 0 && l.isNew {
		return // nothing to keep
	}
	refresh := !hasX || x-float64(c.now) < float64(c.keep()-c.bucket)
	if refresh {
		x, hasX = float64(c.now+c.keep()), true
	}
	if !l.hasX || x != l.x {
		f = append(f, fieldExpires, x)
	}
	if len(f) > 0 {
		tx.hset(l.key, f...)
	}
	if refresh {
		tx.pexpire(l.key, c.keep(), c.now)
	}
	l.x, l.hasX, l.isNew = x, true, false
}

// wait is how long until dropping old buckets brings u under budget:
// from the oldest, each bucket gives back its texts (textsOnly, the spend
// ledger) or its unverified texts.
func (c modelClock) wait(tx *modelTx, key string, u, budget, b float64, textsOnly bool) float64 {
	for x := int64(b); x <= c.cur; x++ {
		s, a := tx.numOr(key, sField(x), 0), tx.numOr(key, aField(x), 0)
		if textsOnly {
			u -= s
		} else {
			u -= s - a
		}
		if u < budget {
			return float64((x+c.nb)*c.bucket - c.now)
		}
	}
	return float64(c.window)
}

// credit counts one approval in a subject (approve.lua's credit): its
// bucket, its window and its day, and a new expiry when the key would keep
// its learned baseline less than learnedKeep less a bucket.
func (c modelClock) credit(tx *modelTx, key string) {
	a, A, d := tx.numOr(key, aField(c.cur), 0), tx.numOr(key, fieldApproved, 0), tx.numOr(key, dField(c.day), 0)
	_, hasB := tx.hget(key, fieldOldest)
	stored, hasStored := tx.num(key, fieldExpires)
	f := []any{aField(c.cur), a + 1, fieldApproved, A + 1, dField(c.day), d + 1}
	if !hasB {
		f = append(f, fieldOldest, float64(c.oldest))
	}
	x, hasX := stored, hasStored
	if !hasX {
		if ttl := tx.pttl(key, c.now); ttl > 0 {
			x, hasX = float64(c.now+ttl), true
		}
	}
	refresh := !hasX || x-float64(c.now) < float64(c.learnedKeep()-c.bucket)
	if refresh {
		x = float64(c.now + c.learnedKeep())
	}
	if !hasStored || x != stored {
		f = append(f, fieldExpires, x)
	}
	tx.hset(key, f...)
	if refresh {
		tx.pexpire(key, c.learnedKeep(), c.now)
	}
}
