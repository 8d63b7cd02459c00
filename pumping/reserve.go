package pumping

// Reserve: a send's decision, one decide.lua call per group of subjects
// (one hash tag), concluded into its reservation.

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"smsgw/otp"
)

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
		if rule > 0 && (refused && res.Refused == nil || !refused && res.Shadow == nil && mode == modeShadow) {
			r, s := g.refusal(c)
			if refused {
				// A subject's id is a piece of its send's keys (pieces): a
				// refusal, which is held in memory, keeps its own copy. (A
				// shadow's lives as long as the reservation, which holds
				// the keys anyway.)
				r.Subject = strings.Clone(r.Subject)
				res.Refused, refusedSubject = &r, s
			} else {
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
	n := 0
	for _, grp := range groups {
		if grp.record != "" {
			out.record = grp.record
		}
		n += len(grp.subjects)
	}
	out.subjects = make([]subject, 0, n)
	for _, grp := range groups {
		out.subjects = append(out.subjects, grp.subjects...)
	}
	return out
}

// decideArgs is one group's decide.lua ARGV for a send.
func (g *Guard) decideArgs(ctx context.Context, grp group, phone otp.Phone, netid string, mode decideMode, signal string) decideArgs {
	_, tail := returningBlock(phone)
	a := g.decideBase()
	a.now, a.mode, a.phone, a.netid, a.record, a.signal, a.tail = g.redisNow(ctx), mode, phone.E164, netid, grp.record != "", signal, tail
	a.subjects = make([]decideSubject, 0, len(grp.subjects))
	h := a.head
	for _, s := range grp.subjects {
		switch s.kind {
		case 'm':
			a.subjects = append(a.subjects, decideSubject{"m", s.price, h.spendP2})
		case 'c':
			a.subjects = append(a.subjects, decideSubject{"c", s.floor, h.countryP2[btoi(g.cfg.ChallengeBudget)][btoi(s.rule == RuleOperator)]})
		default:
			a.subjects = append(a.subjects, decideSubject{s.arg(), s.floor, ""})
		}
	}
	return a
}

// decideBase is what the guard's every decideArgs holds alike, with its
// head (made once).
func (g *Guard) decideBase() decideArgs {
	a := decideArgs{bucket: bucket, buckets: int64(g.cfg.Window / bucket),
		ratio: g.cfg.Ratio, hourFactor: g.cfg.HourFactor, restrictFor: g.cfg.RestrictFor, probeEvery: g.cfg.ProbeEvery,
		returningDays: int64((g.cfg.ReturningFor + 24*time.Hour - 1) / (24 * time.Hour))}
	a.head = g.head.Load()
	if a.head == nil {
		a.head = newDecideHead(a, g.cfg.ChallengeBudget,
			strconv.FormatInt(micros(g.cfg.Spend.Hour), 10)+" "+strconv.FormatInt(micros(g.cfg.Spend.Day), 10))
		g.head.Store(a.head)
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
