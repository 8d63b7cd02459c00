package pumping

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The stated bound (docs/pumping.md, "The stated bound"): what an attack
// nothing can tell apart from new users can text, from the budget formula
// of the model (ledger.budget, ledger.hourBudget, ledger.signBudget). The
// simulation works it out for the rows of such attacks, from the attacked
// subject's ledgers as they stood at each of the attack's texts, and prints
// it next to the row's texts.

// boundRow says whether a scenario is one of the attacks the bound is
// stated for: a spread from the country's own pools, or a launch day.
func boundRow(name string) bool {
	return strings.Contains(name, "from proxies inside") || strings.HasPrefix(name, "launch day")
}

// boundTracker gathers one row's attack texts by the path that let them
// through and the largest bound each path had while they came. A spread
// over a country's numbers also reaches the countries that share its
// calling code (Guernsey, Jersey, the Isle of Man under +44): each
// subject is bounded on its own.
type boundTracker struct {
	mu       sync.Mutex
	operator string // the attacked operator; "": the country
	subjects map[string]*subjectBound
	signed   int                // passed on a caller network's sign
	nets     map[string]float64 // widest network level → its largest signBudget + 1
	// returning are the texts passed on the returning-number sign: the
	// spread hit, by chance, a number a real user verified. Each such
	// number is a real person's and takes at most returningTexts before it
	// counts as new (its free resends, docs/pumping.md "Resends").
	returning map[string]int
	other     int // passed uncounted otherwise: never for an attack
}

// returningTexts is how many texts a returning number passes on its sign
// since its last approval: the first and its two free resends; the fourth
// counts in the country as a new number would.
const returningTexts = 3

// subjectBound is one subject's share of a row.
type subjectBound struct {
	formula  string // the window bound's terms, at its largest
	unsigned int    // counted in the subject's own ledger
	budget   float64
	hours    map[int64]*boundHour // by bucket
	foreign  int                  // counted in the subject's ledger of networks known abroad
	fbudget  float64
	// fhours, for an operator, whose ledger of networks known abroad keeps
	// only the hour's budget: that budget at its largest in each hour.
	fhours map[int64]float64
}

// boundHour is one hour (bucket) of the attack's unsigned texts and the
// largest short-horizon budget they were admitted under.
type boundHour struct {
	texts  int
	budget float64
}

func newBoundTracker(operator string) *boundTracker {
	return &boundTracker{operator: operator, subjects: map[string]*subjectBound{}, nets: map[string]float64{}, returning: map[string]int{}}
}

// note reads, after one attack text was let through, the ledger it counted
// in (or the network whose sign passed it) and keeps the bound's terms.
// countryNew and signal are decide's reply.
func (t *boundTracker) note(p *smsgwPolicy, now time.Time, u *user, countryNew, signal int64) {
	g := p.g
	var sb *subject
	grp := g.destination(u.phone)
	for i := range grp.subjects {
		s := &grp.subjects[i]
		if (t.operator != "" && s.rule == RuleOperator) || (t.operator == "" && s.rule == RuleCountry) {
			sb = s
		}
	}
	if sb == nil {
		return
	}
	c := newModelClock(now.UnixMilli(), ms(bucket), int64(g.cfg.Window/bucket))
	load := func(key string, learn bool) *ledger {
		h, err := g.rdb.HGetAll(context.Background(), key).Result()
		if err != nil {
			panic(err)
		}
		st := newModelStore()
		if len(h) > 0 {
			st.hashes[key] = h
		}
		return c.load(st.begin(), key, learn, "c")
	}
	ratio, hf, floor := g.cfg.Ratio, g.cfg.HourFactor, float64(sb.floor)
	t.mu.Lock()
	defer t.mu.Unlock()
	sbd := t.subjects[sb.id]
	if sbd == nil {
		sbd = &subjectBound{hours: map[int64]*boundHour{}}
		t.subjects[sb.id] = sbd
	}
	switch {
	case countryNew&1 != 0:
		l := load(sb.key, true)
		sbd.unsigned++
		if b := l.budget(floor, ratio, hf); b >= sbd.budget {
			sbd.budget = b
			sbd.formula = fmt.Sprintf("%g + %g × max(%g, %g × %.1f, %g)", floor, ratio, l.A, hf, l.hour, l.pk)
			if l.held > 0 && l.held >= b {
				sbd.formula = fmt.Sprintf("%g held from a trip", l.held)
			}
		}
		h := sbd.hours[c.cur]
		if h == nil {
			h = &boundHour{}
			sbd.hours[c.cur] = h
		}
		h.texts++
		h.budget = max(h.budget, l.hourBudget(floor, ratio))
	case countryNew&4 != 0:
		l := load(sb.foreign, true)
		sbd.foreign++
		ffloor := max(float64(int(floor/3)), 1)
		if sb.rule != RuleOperator {
			sbd.fbudget = max(sbd.fbudget, l.budget(ffloor, ratio, hf))
			break
		}
		// The operator's: the sum over the hours of each hour's budget.
		if sbd.fhours == nil {
			sbd.fhours = map[int64]float64{}
		}
		sbd.fbudget -= sbd.fhours[c.cur]
		sbd.fhours[c.cur] = max(sbd.fhours[c.cur], l.travellersBudget(ffloor, ratio, c.nb))
		sbd.fbudget += sbd.fhours[c.cur]
	case signal == 1:
		t.signed++
		for _, n := range g.caller(u.ip, u.country).subjects {
			if n.sub != "" {
				// The widest level: no level may be over its signBudget for
				// the sign to hold, and every narrower one lies inside it.
				l := load(n.sub, false)
				t.nets[n.sub] = max(t.nets[n.sub], l.signBudget()+1)
				break
			}
		}
	case returningNumber(g.rdb, grp, u):
		t.returning[u.phone.E164]++
	default:
		t.other++
	}
}

// returningNumber says whether u's number approved a code within the
// window the returning sign reads (its block's hash holds its last four
// digits), which is what let an unsigned text through uncounted.
func returningNumber(rdb redis.UniversalClient, grp group, u *user) bool {
	_, tail := returningBlock(u.phone)
	for _, s := range grp.subjects {
		if s.ret != "" && tail != "" {
			ok, err := rdb.HExists(context.Background(), s.ret, tail).Result()
			return err == nil && ok
		}
	}
	return false
}

// boundResult is a row's attack texts next to its bound, summed over its
// subjects; the main subject (the most unsigned texts) names the row.
type boundResult struct {
	subject, formula                 string
	unsigned, signed, foreign, other int
	returning, returningN            int // texts on the returning sign, and their numbers
	budget, fbudget, nets            float64
	worstHour                        boundHour
	hoursOver, netsN                 int
	over                             bool // a subject over its own window bound
}

func (t *boundTracker) result() *boundResult {
	r := &boundResult{signed: t.signed, other: t.other, returningN: len(t.returning)}
	for _, n := range t.returning {
		r.returning += n
	}
	ids := slices.Sorted(maps.Keys(t.subjects))
	main := ""
	for _, id := range ids {
		sb := t.subjects[id]
		if main == "" || sb.unsigned > t.subjects[main].unsigned {
			main = id
		}
		r.unsigned, r.budget, r.foreign, r.fbudget = r.unsigned+sb.unsigned, r.budget+sb.budget, r.foreign+sb.foreign, r.fbudget+sb.fbudget
		if float64(sb.unsigned) > sb.budget || float64(sb.foreign) > sb.fbudget {
			r.over = true
		}
		for _, x := range slices.Sorted(maps.Keys(sb.hours)) {
			if h := sb.hours[x]; float64(h.texts) > h.budget {
				r.hoursOver++
			}
		}
	}
	if main != "" {
		r.subject, r.formula = main, t.subjects[main].formula
		for _, h := range t.subjects[main].hours {
			if h.texts > r.worstHour.texts {
				r.worstHour = *h
			}
		}
		if others := slices.DeleteFunc(ids, func(id string) bool { return id == main }); len(others) > 0 {
			r.subject += " (and " + strings.Join(others, ", ") + ")"
		}
	}
	for _, b := range t.nets {
		r.nets += b
	}
	r.netsN = len(t.nets)
	return r
}

func (r *boundResult) texts() int {
	return r.unsigned + r.signed + r.foreign + r.returning + r.other
}

// bound is the row's whole bound: the subject's budget, its ledger of
// networks known abroad, the approving networks' sign, each at its
// largest while the attack ran, and the returning numbers it hit.
func (r *boundResult) bound() float64 {
	return r.budget + r.fbudget + r.nets + float64(returningTexts*r.returningN)
}

// within says whether every path stayed inside its own bound, and every
// hour inside its short horizon.
func (r *boundResult) within() bool {
	return !r.over && float64(r.signed) <= r.nets && r.returning <= returningTexts*r.returningN && r.other == 0 && r.hoursOver == 0
}

func printBounds(rows []simRow) {
	var any bool
	for _, r := range rows {
		if r.bound == nil {
			continue
		}
		if !any {
			fmt.Printf("\nThe stated bound (docs/pumping.md): smsgw's attack texts in the rows nothing can tell apart, by the path that let them through, next to the bound from the model's budget formula, each at its largest while the attack ran; a spread that reached the countries sharing a calling code is summed over them, each held to its own bound (the formula shown is the main subject's)\n\n")
			fmt.Printf("| scenario | subject | attack texts | bound | within | unsigned texts | bound: floor + ratio × max(A, hour_factor × hour, pk) | worst hour's unsigned texts | bound: floor + ratio × hour | hours over | on a network's sign | bound: Σ per network A + 2 (networks) | foreign ledger | bound | on a returning number | bound: 3 × numbers |\n")
			fmt.Printf("|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
			any = true
		}
		fmt.Print(boundLine(r))
	}
}

func boundLine(r simRow) string {
	b := r.bound
	within := "yes"
	if !b.within() {
		within = "**no**"
	}
	return fmt.Sprintf("| %s | %s | %d | %.0f | %s | %d | %.0f (%s) | %d | %.1f | %d | %d | %.0f (%d) | %d | %.0f | %d | %d (%d) |\n", r.scenario, b.subject, b.texts(),
		b.bound(), within, b.unsigned, b.budget, b.formula, b.worstHour.texts, b.worstHour.budget, b.hoursOver, b.signed, b.nets,
		b.netsN, b.foreign, b.fbudget, b.returning, returningTexts*b.returningN, b.returningN)
}
