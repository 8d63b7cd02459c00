package pumping

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/otp"
)

// The operators' list lives in one hash (one slot on a cluster): fields
// "h\x00<family>\x00<id>" for held subjects and "n\x00<family>\x00<id>" for
// subjects near their budget, each a JSON adminEntry. It is bounded, and
// pruned as it is read.
const adminEntries = 10_000

// nearRatio is how close to its budget a subject must be to be listed.
const nearRatio = 0.8

type adminEntry struct {
	Rule    string   `json:"rule"`
	Subject string   `json:"subject"`
	Used    float64  `json:"used"`
	Limit   float64  `json:"limit"`
	Until   int64    `json:"until_ms"` // a hold's end; a near entry's last sighting + the window
	Keys    []string `json:"keys"`
}

var putEntry = redis.NewScript(`
if redis.call('HLEN', KEYS[1]) < tonumber(ARGV[3]) or redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
return 1`)

func (g *Guard) adminKey() string { return g.prefix + "pump:{admin}" }
func (g *Guard) channel() string  { return g.prefix + "pump:events" }

// subjectKeys are what a lift deletes: a country's returning users stay,
// its ledger of networks known abroad goes with it.
func subjectKeys(s subject) []string {
	if s.foreign != "" {
		return []string{s.key, s.foreign}
	}
	return []string{s.key}
}

// remember holds a refused subject in this replica's memory and lists it
// for the operators.
func (g *Guard) remember(ctx context.Context, r otp.PumpingRefusal, s subject) {
	now := g.nowCtx(ctx)
	// A restricted country (or operator) still serves the sends that carry
	// a sign of a real user: only Redis can tell them, so it is never held
	// in memory.
	if s.kind != 'c' {
		g.holds.put(holdKey(r.Scope, r.Subject), r, now, g.cfg.HoldFor)
	} else if _, seen := g.nearSeen.get("h\x00"+r.Subject, now); seen {
		return // listed a moment ago: a flood of refusals costs no extra call
	} else {
		g.nearSeen.put("h\x00"+r.Subject, otp.PumpingRefusal{RetryAfter: 10 * time.Second}, now, 10*time.Second)
	}
	e := adminEntry{Rule: r.Rule, Subject: r.Subject, Used: r.Used, Limit: r.Limit,
		Until: now.Add(r.RetryAfter).UnixMilli(), Keys: subjectKeys(s)}
	g.putEntry(ctx, "h\x00"+holdKey(r.Scope, r.Subject), e)
}

// noteNear lists the subject of a call's reply closest to its budget, when
// it is close, at most once a minute per subject and replica.
func (g *Guard) noteNear(ctx context.Context, c call) {
	i, used, limit := c.reply.near, float64(c.reply.nearUsed), float64(c.reply.nearBudget)
	if i <= 0 || limit <= 0 || used/limit < nearRatio {
		return
	}
	s := c.grp.subjects[i-1]
	key := holdKey(scope(s.rule), s.id)
	now := g.nowCtx(ctx)
	if _, seen := g.nearSeen.get(key, now); seen {
		return
	}
	g.nearSeen.put(key, otp.PumpingRefusal{RetryAfter: time.Minute}, now, time.Minute)
	if s.kind == 'm' {
		used, limit = used/1e6, limit/1e6
	}
	g.putEntry(ctx, "n\x00"+key, adminEntry{Rule: s.rule, Subject: s.id, Used: used, Limit: limit,
		Until: now.Add(g.cfg.Window).UnixMilli(), Keys: subjectKeys(s)})
}

func (g *Guard) putEntry(ctx context.Context, field string, e adminEntry) {
	b, _ := json.Marshal(e)
	if err := putEntry.Run(context.WithoutCancel(ctx), g.rdb, []string{g.adminKey()}, field, b, adminEntries).Err(); err != nil {
		g.log.WarnContext(ctx, "listing a pumping subject for the operators failed", "err", err)
	}
}

// Holds lists the subjects refused now and those near their budgets,
// fullest first.
func (g *Guard) Holds(ctx context.Context) (held, near []otp.PumpingHold, err error) {
	all, err := g.rdb.HGetAll(ctx, g.adminKey()).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("pumping: holds: %w", err)
	}
	now := g.nowCtx(ctx)
	var stale []string
	for field, v := range all {
		var e adminEntry
		if json.Unmarshal([]byte(v), &e) != nil || e.Until <= now.UnixMilli() {
			stale = append(stale, field)
			continue
		}
		h := otp.PumpingHold{Rule: e.Rule, Subject: e.Subject, Used: e.Used, Limit: e.Limit,
			Remaining: time.UnixMilli(e.Until).Sub(now)}
		if restricts(e.Rule) && len(e.Keys) > 0 {
			if h.Restricted, err = g.restriction(ctx, e.Keys[0], now); err != nil {
				return nil, nil, err
			}
			if h.Restricted == nil && len(e.Keys) > 1 {
				if h.Restricted, err = g.restriction(ctx, e.Keys[1], now); err != nil {
					return nil, nil, err
				}
				if h.Restricted != nil {
					h.Restricted.Abroad = true
				}
			}
		}
		if strings.HasPrefix(field, "h\x00") {
			held = append(held, h)
		} else {
			near = append(near, h)
		}
	}
	if len(stale) > 0 {
		if err := g.rdb.HDel(ctx, g.adminKey(), stale...).Err(); err != nil {
			g.log.WarnContext(ctx, "pruning the operators' pumping list failed", "err", err)
		}
	}
	for _, l := range [][]otp.PumpingHold{held, near} {
		sort.Slice(l, func(i, j int) bool {
			a, b := l[i].Used/max(l[i].Limit, 1), l[j].Used/max(l[j].Limit, 1)
			if a != b {
				return a > b
			}
			return l[i].Rule+l[i].Subject < l[j].Rule+l[j].Subject
		})
	}
	return held, near, nil
}

// Lift forgets a subject's counts, so its budget starts afresh, and drops
// its hold on every replica. rule and subject are as Holds lists them. The
// wider subjects of its family that contain it (a /32's /24, a block of
// 100's blocks of 1k to 100k) are cleared with it: their counts hold the
// same unverified texts, and would hold the next send in its place.
func (g *Guard) Lift(ctx context.Context, rule, subject string) error {
	key := holdKey(scope(rule), subject)
	fields := []string{"h\x00" + key, "n\x00" + key}
	vals, err := g.rdb.HMGet(ctx, g.adminKey(), fields...).Result()
	if err != nil {
		return fmt.Errorf("pumping: lift: %w", err)
	}
	var keys []string
	for _, v := range vals {
		var e adminEntry
		if s, ok := v.(string); ok && json.Unmarshal([]byte(s), &e) == nil {
			keys = e.Keys
		}
	}
	if keys == nil {
		return otp.Errorf(otp.ENotFound, "%s %s is neither held nor near its budget", rule, subject)
	}
	if restricts(rule) && len(keys) > 1 {
		// Only the ledger of networks known abroad is restricted: the
		// country's own ledger (its approvals, its learned baseline) stays.
		if r, err := g.restriction(ctx, keys[0], g.nowCtx(ctx)); err != nil {
			return fmt.Errorf("pumping: lift: %w", err)
		} else if r == nil {
			keys = keys[1:]
		}
	}
	lifted := []liftTarget{{hold: key, keys: keys}}
	lifted = append(lifted, g.wider(rule, subject, keys)...)
	for _, t := range lifted {
		for _, k := range t.keys { // one at a time: on a cluster they may be in different slots
			if err := g.rdb.Del(ctx, k).Err(); err != nil {
				return fmt.Errorf("pumping: lift: %w", err)
			}
		}
		if err := g.rdb.HDel(ctx, g.adminKey(), "h\x00"+t.hold, "n\x00"+t.hold).Err(); err != nil {
			return fmt.Errorf("pumping: lift: %w", err)
		}
		g.holds.drop(t.hold)
		if err := g.rdb.Publish(ctx, g.channel(), "lift "+t.hold).Err(); err != nil {
			return fmt.Errorf("pumping: lift: announcing it: %w", err)
		}
	}
	return nil
}

// liftTarget is one subject a lift clears: its hold key and Redis keys.
type liftTarget struct {
	hold string
	keys []string
}

// wider lists the subjects of rule's family that contain subject, whose
// counts a lift of subject clears too. keys are the lifted subject's own.
func (g *Guard) wider(rule, subject string, keys []string) []liftTarget {
	var out []liftTarget
	switch scope(rule) {
	case "network":
		bits, ok := ruleBits(rule)
		if !ok {
			return nil
		}
		addr, err := netip.ParseAddr(subject)
		if p, perr := netip.ParsePrefix(subject); perr == nil {
			addr, err = p.Addr(), nil
		}
		if err != nil {
			return nil
		}
		for _, s := range g.caller(addr, "").subjects {
			if b, ok := ruleBits(s.rule); ok && b < bits {
				out = append(out, liftTarget{hold: holdKey("network", s.id), keys: []string{s.key}})
			}
		}
	case "range":
		// keys[0] is "<tag>r:<block>", the block the number's digits
		// without the rule's dropped ones.
		i := strings.LastIndex(keys[0], "r:")
		drop, ok := rangeDigits[rule]
		if i < 0 || !ok {
			return nil
		}
		tag, block := keys[0][:i], keys[0][i+2:]
		for _, r := range []string{RuleRange1k, RuleRange10k, RuleRange100k} {
			d := rangeDigits[r]
			if d <= drop || len(block)-(d-drop) < 1 {
				continue
			}
			b := block[:len(block)-(d-drop)]
			out = append(out, liftTarget{hold: holdKey("range", "+"+b+strings.Repeat("x", d)), keys: []string{tag + "r:" + b}})
		}
	}
	return out
}

// restricts says whether a rule's subjects are restricted rather than held:
// a country and an operator serve their signed sends while over budget.
func restricts(rule string) bool { return rule == RuleCountry || rule == RuleOperator }

// restrictionFields are the fields restriction reads.
var restrictionFields = []string{fieldRestrictedSince, fieldRestrictedUntil, fieldTripUsed, fieldTripBudget,
	fieldTripHour, fieldTripWindow, fieldRefused, fieldServedReturning, fieldServedNetwork, fieldServedChallenge}

// restriction reads a country's (or an operator's) restricted state from
// its hash (see decide.lua): nil when it is not restricted now.
func (g *Guard) restriction(ctx context.Context, key string, now time.Time) (*otp.CountryRestriction, error) {
	v, err := g.rdb.HMGet(ctx, key, restrictionFields...).Result()
	if err != nil {
		return nil, fmt.Errorf("pumping: holds: %w", err)
	}
	n := make(map[string]int64, len(v))
	for i, x := range v {
		if s, ok := x.(string); ok {
			n[restrictionFields[i]], _ = strconv.ParseInt(s, 10, 64)
		}
	}
	if n[fieldRestrictedUntil] <= now.UnixMilli() {
		return nil, nil
	}
	return &otp.CountryRestriction{Since: time.UnixMilli(n[fieldRestrictedSince]), Until: time.UnixMilli(n[fieldRestrictedUntil]),
		Unverified: float64(n[fieldTripUsed]), Budget: float64(n[fieldTripBudget]), Hour: n[fieldTripHour] == 1,
		Refused: n[fieldRefused], ServedReturning: n[fieldServedReturning], ServedNetwork: n[fieldServedNetwork],
		ServedChallenge: n[fieldServedChallenge]}, nil
}
