package pumping

import (
	"container/heap"
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/internal/redisbatch"
	"smsgw/internal/testenv"
	"smsgw/otp"
)

// BenchmarkPumpingSimulation runs synthetic traffic through smsgw's pumping
// rules on real Redis with a virtual clock, next to three baselines fed the
// same traffic in the same run, and prints what each let through and whom
// it refused. `make bench-pumping` runs it; docs/pumping.md explains it.
//
// Real users: six countries on a daily curve, each converting between 70%
// and 90%, with resends, some behind carrier CGNAT addresses shared by many.
// Every policy also has smsgw's per-IP and per-phone windows (kept in memory
// here: the windows are not what is measured); their refusals are reported
// apart. Warm scenarios run on one continuous timeline: a day of real
// traffic first, then one day per attack, so the rules have history.
func BenchmarkPumpingSimulation(b *testing.B) {
	rdb, prefix := testenv.Redis(b)
	scale := 1.0
	if v := os.Getenv("SMSGW_SIM_SCALE"); v != "" {
		fmt.Sscan(v, &scale)
	}
	for b.Loop() {
		var rows []simRow
		start := time.Now()
		warm := newSim(rdb, prefix+"warm:", scale, 1)
		warm.run(nil, 24*time.Hour)         // history
		only := os.Getenv("SMSGW_SIM_ONLY") // substrings of the scenarios to run, | between them
		for _, sc := range warmScenarios(scale) {
			if !simSelected(sc.name, only) {
				continue
			}
			rows = append(rows, warm.run(&sc, sc.length)...)
			fmt.Fprintf(os.Stderr, "%s: %s\n", time.Since(start).Round(time.Second), sc.name)
			streamRows(rows)
			dumpServed(sc.name)
		}
		for i, sc := range coldScenarios(scale) {
			if !simSelected(sc.name, only) {
				continue
			}
			cold := newSim(rdb, fmt.Sprintf("%scold%d:", prefix, i), scale, uint64(2+i))
			rows = append(rows, cold.run(&sc, sc.length)...)
			fmt.Fprintf(os.Stderr, "%s: %s\n", time.Since(start).Round(time.Second), sc.name)
			streamRows(rows)
			dumpServed(sc.name)
		}
		printSim(rows, time.Since(start), 0.6*scale)
		printBounds(rows)
		worstAttack, worstUsers, worstChallenged := 0.0, 0.0, 0.0
		for _, r := range rows {
			switch r.policy {
			case "smsgw":
				worstAttack = max(worstAttack, r.attackShare())
				worstUsers = max(worstUsers, r.attackedShare())
			case "smsgw + challenge", "smsgw + challenge, budgeted":
				worstChallenged = max(worstChallenged, r.userShare())
			}
		}
		b.ReportMetric(worstAttack*100, "worst-attack-%")
		b.ReportMetric(worstUsers*100, "worst-attacked-country-users-refused-%")
		b.ReportMetric(worstChallenged*100, "worst-users-refused-with-challenge-%")
	}
}

// --- traffic ---

type country struct {
	code    string
	share   float64 // of real users
	convert float64 // share of real users who verify
	price   float64 // per text
	// login is the share of real sends that are returning users logging in
	// (numbers that verified before), once there is history: see
	// docs/pumping.md for the reasoning.
	login     float64
	templates []string
}

// Templates: "+" then digits; each x a random digit. Numbers are checked
// against phonenumbers' metadata (valid, in this region) as generated.
var countries = []country{
	{"US", 0.34, 0.88, 0.008, 0.6, []string{"+1650xxxxxxx", "+1415xxxxxxx", "+1212xxxxxxx", "+1305xxxxxxx", "+1713xxxxxxx", "+1917xxxxxxx"}},
	{"GB", 0.20, 0.85, 0.04, 0.6, []string{"+4474xxxxxxxx", "+4475xxxxxxxx", "+4477xxxxxxxx", "+4478xxxxxxxx", "+4479xxxxxxxx"}},
	{"DE", 0.14, 0.90, 0.07, 0.6, deTemplates},
	{"BR", 0.13, 0.78, 0.02, 0.5, []string{"+55119xxxxxxxx", "+55219xxxxxxxx", "+55319xxxxxxxx"}},
	{"IN", 0.11, 0.72, 0.005, 0.4, []string{"+919xxxxxxxxx", "+918xxxxxxxxx", "+917xxxxxxxxx"}},
	{"NG", 0.08, 0.70, 0.03, 0.4, ngTemplates},
}

// Operators' ranges (libphonenumber's prefix data names them), and the
// countries' templates over them in realistic shares (a template drawn
// twice is twice as likely): Germany about a third each (T-Mobile,
// Vodafone, O2), Nigeria MTN 45%, Glo 25%, Airtel 25%, 9mobile 5%. Great
// Britain and India spread over many operators as they are; the US and
// Brazil have no operator data.
var (
	deOperators = map[string][]string{
		"T-Mobile": {"+49151xxxxxxxx", "+49170xxxxxxxx", "+49171xxxxxxxx"},
		"Vodafone": {"+49172xxxxxxxx", "+49173xxxxxxxx"},
		"O2":       {"+49176xxxxxxxx", "+49179xxxxxxxx"},
	}
	ngOperators = map[string][]string{
		"MTN":     {"+234803xxxxxxx", "+234806xxxxxxx", "+234813xxxxxxx", "+234816xxxxxxx", "+234703xxxxxxx"},
		"Glo":     {"+234805xxxxxxx", "+234807xxxxxxx", "+234815xxxxxxx", "+234811xxxxxxx", "+234905xxxxxxx"},
		"Airtel":  {"+234802xxxxxxx", "+234808xxxxxxx", "+234812xxxxxxx"},
		"9mobile": {"+234809xxxxxxx"},
	}
	deTemplates = weighted(map[string]int{"T-Mobile": 1, "Vodafone": 1, "O2": 1}, deOperators, 6)
	ngTemplates = weighted(map[string]int{"MTN": 9, "Glo": 5, "Airtel": 5, "9mobile": 1}, ngOperators, 1)
)

// weighted lists each operator's templates so that it is drawn in
// proportion to its share, each share's worth of templates spread evenly
// over its ranges (per templates for a share of 1).
func weighted(shares map[string]int, ops map[string][]string, per int) []string {
	var out []string
	for _, op := range slices.Sorted(maps.Keys(shares)) {
		ranges := ops[op]
		for i := range shares[op] * per {
			out = append(out, ranges[i%len(ranges)])
		}
	}
	return out
}

// operatorShare is the share of country ci's users who are customers of
// op (by its templates' weight).
func operatorShare(ci int, op string) float64 {
	n := 0
	for _, t := range countries[ci].templates {
		if ph, err := otp.ParsePhone(strings.ReplaceAll(t, "x", "5"), ""); err == nil && ph.Operator() == op {
			n++
		}
	}
	return float64(n) / float64(len(countries[ci].templates))
}

// Destinations attackers favour, and what a text there costs.
var exotic = map[string]struct {
	price    float64
	template string
}{
	"LV": {0.09, "+3712xxxxxxx"}, "PH": {0.12, "+63917xxxxxxx"}, "SL": {0.15, "+23276xxxxxx"},
	"BT": {0.11, "+97517xxxxxx"}, "LT": {0.08, "+3706xxxxxxx"}, "EE": {0.08, "+3725xxxxxxx"},
}

func priceOf(c string) float64 {
	for _, k := range countries {
		if k.code == c {
			return k.price
		}
	}
	return exotic[c].price
}

// fill replaces each x of a template with a random digit.
func fill(r *rand.Rand, t string) string {
	var b strings.Builder
	for _, c := range t {
		if c == 'x' {
			b.WriteByte(byte('0' + r.IntN(10)))
		} else {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// numberIn draws valid numbers of region from templates.
func numberIn(r *rand.Rand, region string, templates []string) otp.Phone {
	for {
		p, err := otp.ParsePhone(fill(r, templates[r.IntN(len(templates))]), "")
		if err == nil && p.Country() == region {
			return p
		}
	}
}

// network draws a real user's address: a carrier CGNAT address shared by
// many, a residential IPv4 address, or an IPv6 /64.
func network(r *rand.Rand, ci int) netip.Addr {
	switch x := r.Float64(); {
	case x < 0.25: // 12 CGNAT addresses per country
		return netip.AddrFrom4([4]byte{100, byte(10 + ci), 0, byte(r.IntN(12))})
	case x < 0.70:
		return residential(r, ci)
	default:
		return customerV6(r, ci)
	}
}

// customerV6 is an IPv6 customer of country ci: 4 ISPs' /32s, a /64 per
// customer.
func customerV6(r *rand.Rand, ci int) netip.Addr {
	var a [16]byte
	a[0], a[1], a[2], a[3] = 0x2a, byte(ci), 0, byte(r.IntN(4))
	for i := 4; i < 8; i++ {
		a[i] = byte(r.IntN(256))
	}
	a[15] = 1
	return netip.AddrFrom16(a)
}

// travelShare is the share of real users who ask for a code from another
// country's network: a hotel's or a café's Wi-Fi abroad, a VPN with an exit
// in a residential pool (a phone roaming on mobile data keeps its home
// carrier's address, so it is not one of them). We know of no published
// figure; 2% is generous for a consumer app, so the rules that read a
// network's country are measured against more travellers than they meet.
const travelShare = 0.02

// travelling is a real user's address abroad: another country's
// residential IPv4 or IPv6 customer network.
func travelling(r *rand.Rand, ci int) netip.Addr {
	o := elsewhere(r, ci)
	if r.IntN(2) == 0 {
		return residential(r, o)
	}
	return customerV6(r, o)
}

// elsewhere picks one of the countries other than ci.
func elsewhere(r *rand.Rand, ci int) int {
	o := r.IntN(len(countries) - 1)
	if o >= ci {
		o++
	}
	return o
}

// residential is an address in country ci's residential pools: 40 /16s.
func residential(r *rand.Rand, ci int) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(20 + ci), byte(r.IntN(40)), byte(r.IntN(256)), byte(1 + r.IntN(254))})
}

// dailyRate is real users per second at time of day d: a night trough and
// an evening peak, averaging about `avg`.
func dailyRate(avg float64, d time.Duration) float64 {
	h := d.Hours()
	return avg * (1 + 0.7*math.Sin(2*math.Pi*(h-14)/24))
}

// --- attacks ---

type attackKind int

const (
	sequential attackKind = iota // consecutive numbers from a start
	spread                       // random numbers within ranges
	repeat                       // the same few numbers over and over (pool of them)
)

// wave is one attacker's traffic.
type wave struct {
	start, dur time.Duration
	rate       float64 // attempts per second
	kind       attackKind
	ranges     []string // templates with x for the digits it picks (sequential: the start number)
	from       func(r *rand.Rand) netip.Addr
	// verifyOwn is the share of attempts spent on texting and verifying the
	// attacker's own numbers (ownNumbers) from the same networks, to fake
	// conversion.
	verifyOwn  float64
	ownNumbers []otp.Phone
	// pool is how many numbers a repeat wave texts in turn.
	pool int
}

type scenario struct {
	name  string
	waves []wave
	// length of the period simulated
	length time.Duration
	// attacked is the real country the attack targets, if any: its users
	// while the attack runs are reported apart.
	attacked string
	// operator, when the attack is on one operator's ranges of attacked:
	// its users are reported apart from the country's other operators'.
	operator string
}

// attackWindow is when the scenario's attack runs, plus restrict_for after
// it (a country stays restricted that long).
func (sc *scenario) attackWindow() (from, to time.Duration) {
	from = time.Duration(math.MaxInt64)
	for _, w := range sc.waves {
		from = min(from, w.start)
		to = max(to, w.start+w.dur+DefaultConfig().RestrictFor)
	}
	return from, to
}

func rotating64In48(r *rand.Rand) netip.Addr {
	return netip.AddrFrom16([16]byte{0x2a, 0x0b, 0x66, 0x00, 0x00, 0x07, byte(r.IntN(256)), byte(r.IntN(256)), 15: 9})
}

func newSlash24(r *rand.Rand) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(60 + r.IntN(100)), byte(r.IntN(256)), byte(r.IntN(256)), byte(1 + r.IntN(254))})
}

func warmScenarios(scale float64) []scenario {
	r := rand.New(rand.NewPCG(7, 7))
	var dripRanges []string
	for _, c := range []string{"LV", "PH", "SL", "BT", "LT", "EE"} {
		for range 6 {
			p := numberIn(r, c, []string{exotic[c].template})
			dripRanges = append(dripRanges, p.E164[:len(p.E164)-4]+"xxxx")
		}
	}
	for _, c := range []string{"GB", "IN"} {
		for range 6 {
			p := numberIn(r, c, countries[slices.IndexFunc(countries, func(k country) bool { return k.code == c })].templates)
			dripRanges = append(dripRanges, p.E164[:len(p.E164)-4]+"xxxx")
		}
	}
	var own []otp.Phone
	for range 40 {
		own = append(own, numberIn(r, "PH", []string{"+63918xxxxxxx"}))
	}
	h := time.Hour
	out := []scenario{
		{name: "burst on one range, rotating /64s of one /48", waves: []wave{{start: 14 * h, dur: 4 * time.Minute, rate: 25, kind: sequential,
			ranges: []string{"+37126000000"}, from: rotating64In48}}},
		{name: "residential proxies, a new /24 per request", waves: []wave{{start: 10 * h, dur: 10 * time.Minute, rate: 10, kind: sequential,
			ranges: []string{"+447400100000"}, from: newSlash24}}},
		{name: "slow drip over 48 ranges of 8 countries", waves: []wave{{start: time.Hour, dur: 22 * h, rate: 0.25, kind: spread,
			ranges: dripRanges, from: newSlash24}}},
		{name: "attack on the busiest country (US)", attacked: "US", waves: []wave{{start: 19 * h, dur: 10 * time.Minute, rate: 10, kind: spread,
			ranges: []string{"+1650253xxxx", "+1713555xxxx"}, from: newSlash24}}},
		// Each number at the phone windows' pace (one every 6 minutes),
		// nobody verifying: every text after the first is a resend.
		{name: "resends to 20 numbers from rotating proxies", waves: []wave{{start: time.Hour, dur: 22 * h, rate: 20.0 / 360, kind: repeat,
			pool: 20, ranges: []string{"+3712xxxxxxx"}, from: newSlash24}}},
		{name: "attacker verifies own numbers to fake conversion", waves: []wave{{start: 16 * h, dur: 30 * time.Minute, rate: 5, kind: sequential,
			ranges: []string{"+639171000000"}, from: rotating64In48, verifyOwn: 0.03, ownNumbers: own}}},
	}
	for i := range out {
		out[i].length = 24 * h
	}
	// Spreads at random over the whole mobile space of the three busiest
	// countries, at 1x, 10x and 100x the country's real rate, from
	// residential proxies abroad and from the country's own residential
	// pools. Each runs in a period of 8 hours, starting an hour in; the
	// countries take turns, so the same country is attacked a day apart.
	for _, origin := range []string{"abroad", "inside"} {
		for _, x := range []float64{1, 10, 100} {
			for ci := range 3 {
				out = append(out, spreadScenario(scale, ci, x, origin, h, 8*h, spreadDuration(x, false)))
			}
		}
	}
	// A spread that mixes in numbers of the attacker's own, verified.
	var ownUS []otp.Phone
	for range 40 {
		ownUS = append(ownUS, numberIn(r, "US", countries[0].templates))
	}
	mixed := spreadScenario(scale, 0, 10, "abroad", h, 8*h, 2*h)
	mixed.name = "US 10x spread from proxies abroad, 3% on 40 verified numbers of its own"
	mixed.waves[0].verifyOwn, mixed.waves[0].ownNumbers = 0.03, ownUS
	out = append(out, mixed)
	// Spreads over one operator's ranges (pumping is paid through the
	// operator), at 1x, 10x and 100x that operator's real rate, from abroad
	// and from the country's own pools.
	for _, origin := range []string{"abroad", "inside"} {
		for _, x := range []float64{1, 10, 100} {
			out = append(out, operatorScenario(scale, 2, "O2", deOperators["O2"], x, origin, h, 8*h, spreadDuration(x, false)),
				operatorScenario(scale, 5, "Glo", ngOperators["Glo"], x, origin, h, 8*h, spreadDuration(x, false)))
		}
	}
	return out
}

// operatorScenario is a random spread over one operator's ranges of
// country ci at x times that operator's real rate.
func operatorScenario(scale float64, ci int, op string, ranges []string, x float64, origin string, start, length, dur time.Duration) scenario {
	sc := spreadScenario(scale, ci, x, origin, start, length, dur)
	sc.name = fmt.Sprintf("%s %s %gx operator spread from proxies %s", countries[ci].code, op, x, origin)
	sc.operator = op
	sc.waves[0].ranges = ranges
	sc.waves[0].rate *= operatorShare(ci, op)
	return sc
}

// spreadDuration is how long a spread at x times a country's rate lasts:
// long enough at 1x that a held attack's first texts are under 1% of it.
func spreadDuration(x float64, launch bool) time.Duration {
	switch {
	case x <= 1 && launch:
		return 2 * time.Hour
	case x <= 1:
		return 6 * time.Hour
	case x <= 10 && launch:
		return time.Hour
	case x <= 10:
		return 2 * time.Hour
	}
	return 20 * time.Minute
}

// spreadScenario is a random spread over country ci's mobile numbers at x
// times its real rate, from residential proxies of the other countries
// ("abroad") or of its own pools ("inside").
func spreadScenario(scale float64, ci int, x float64, origin string, start, length, dur time.Duration) scenario {
	c := countries[ci]
	from := func(r *rand.Rand) netip.Addr { return residential(r, ci) }
	if origin == "abroad" {
		from = func(r *rand.Rand) netip.Addr { return residential(r, elsewhere(r, ci)) }
	}
	return scenario{name: fmt.Sprintf("%s %gx spread from proxies %s", c.code, x, origin), attacked: c.code, length: length,
		waves: []wave{{start: start, dur: dur, rate: x * 0.6 * scale * c.share, kind: spread, ranges: c.templates, from: from}}}
}

// coldScenarios each run on an empty Redis: a new deployment's first hour
// under a burst, and launch days under spreads.
func coldScenarios(scale float64) []scenario {
	out := []scenario{{name: "first hour of a new deployment", length: time.Hour, waves: []wave{{start: 5 * time.Minute, dur: 4 * time.Minute,
		rate: 25, kind: sequential, ranges: []string{"+37126000000"}, from: rotating64In48}}}}
	for _, origin := range []string{"abroad", "inside"} {
		for _, x := range []float64{1, 10, 100} {
			for ci := range 3 {
				sc := spreadScenario(scale, ci, x, origin, 10*time.Minute, 3*time.Hour, spreadDuration(x, true))
				sc.name = "launch day, " + sc.name
				out = append(out, sc)
			}
		}
	}
	return out
}

// --- the event loop ---

type eventKind int

const (
	evSend eventKind = iota
	evVerify
	evResend
)

// user is one person (or one attack attempt) and what they will do.
type user struct {
	phone    otp.Phone
	ip       netip.Addr
	attack   bool
	own      bool // an attacker's own number, verified
	verifies bool
	delay    time.Duration // from text to code typed
	resendIn time.Duration // 0: never
	country  string
	start    time.Duration // of the first send, from the period's start
	// solves is whether they solve a bot challenge when asked: real users
	// 97%, attack traffic 5% (a solving farm's price).
	solves    bool
	refusedBy string // first pumping rule that refused one of their sends
	windowed  bool   // a window refused one of their sends
	texts     int
}

type event struct {
	at   time.Duration
	kind eventKind
	u    *user
}

type queue []event

func (q queue) Len() int           { return len(q) }
func (q queue) Less(i, j int) bool { return q[i].at < q[j].at }
func (q queue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)        { *q = append(*q, x.(event)) }
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// verdict of one send under one policy.
type verdict struct {
	pumping string // the refusing pumping rule
	window  bool
}

// policy decides sends and hears approvals. Windows are each policy's own.
type policy interface {
	name() string
	decide(now time.Time, u *user) verdict
	approved(now time.Time, u *user)
}

// sim is one timeline: smsgw on Redis and the baselines in memory.
type sim struct {
	epoch    time.Time
	elapsed  time.Duration
	rng      *rand.Rand
	scale    float64
	policies []policy
	// verified are the numbers per country that verified in earlier
	// periods: returning users log in with them.
	verified map[string][]otp.Phone
}

func newSim(rdb redis.UniversalClient, prefix string, scale float64, seed uint64) *sim {
	s := &sim{epoch: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC), rng: rand.New(rand.NewPCG(seed, 1)), scale: scale,
		verified: map[string][]otp.Phone{}}
	s.policies = []policy{
		newSmsgw(rdb, prefix, false, false),
		newSmsgw(rdb, prefix+"challenge:", true, false),
		newSmsgw(rdb, prefix+"budgeted:", true, true),
		&windowsOnly{w: newWindows()},
		newCountryQuarantine(),
		newAuthgear(),
	}
	return s
}

// simTime carries a send's virtual time to the guard's clock.
type simTime struct{}

func virtualClock(ctx context.Context) time.Time { return ctx.Value(simTime{}).(time.Time) }

type simRow struct {
	scenario, policy         string
	attempts, texts, decoys  int
	cost                     float64
	users, refused, windowed int
	realTexts                int
	// attacked: the attacked country's users while the attack ran (and
	// restrict_for after), and those refused; others: everyone else. When
	// the attack is on one operator, attacked are the country's other
	// operators' users, op the attacked operator's.
	attacked, attackedRefused, others, othersRefused int
	op, opRefused                                    int
	// byRule counts the real users each pumping rule refused.
	byRule map[string]int
	// bound: smsgw's attack texts next to the stated bound, in the rows
	// it is stated for (sim_bound_test.go).
	bound *boundResult
}

func (r simRow) attackShare() float64 { return float64(r.texts) / float64(max(r.attempts, 1)) }
func (r simRow) userShare() float64   { return float64(r.refused) / float64(max(r.users, 1)) }
func (r simRow) attackedShare() float64 {
	return float64(r.attackedRefused) / float64(max(r.attacked, 1))
}

// generate lays out one period's users: real ones on the daily curve and
// the scenario's attackers.
func (s *sim) generate(sc *scenario, length time.Duration) []*user {
	var out []*user
	avg := 0.6 * s.scale
	for t := time.Duration(0); t < length; {
		rate := dailyRate(avg, t)
		t += time.Duration(s.rng.ExpFloat64() / rate * float64(time.Second))
		if t >= length {
			break
		}
		ci := pick(s.rng, countries)
		c := countries[ci]
		u := &user{phone: numberIn(s.rng, c.code, c.templates), ip: network(s.rng, ci), country: c.code,
			verifies: s.rng.Float64() < c.convert, delay: time.Duration(10+s.rng.IntN(110)) * time.Second,
			solves: s.rng.Float64() < 0.97}
		if pool := s.verified[c.code]; len(pool) > 0 && s.rng.Float64() < c.login {
			u.phone = pool[s.rng.IntN(len(pool))]
		}
		if s.rng.Float64() < travelShare {
			u.ip = travelling(s.rng, ci)
		}
		if !u.verifies && s.rng.Float64() < 0.5 || s.rng.Float64() < 0.08 {
			u.resendIn = time.Duration(60+s.rng.IntN(120)) * time.Second
		}
		u.start = t
		out = append(out, u)
	}
	if sc == nil {
		return out
	}
	for _, w := range sc.waves {
		n := int(w.rate * w.dur.Seconds())
		next := make([]int64, len(w.ranges))
		var pool []otp.Phone
		for range w.pool {
			for {
				if p, err := otp.ParsePhone(fill(s.rng, w.ranges[s.rng.IntN(len(w.ranges))]), ""); err == nil {
					pool = append(pool, p)
					break
				}
			}
		}
		for i := 0; i < n; i++ {
			at := w.start + time.Duration(float64(i)/w.rate*float64(time.Second))
			u := &user{attack: true, ip: w.from(s.rng), solves: s.rng.Float64() < 0.05}
			if w.verifyOwn > 0 && s.rng.Float64() < w.verifyOwn {
				u.phone, u.own, u.verifies, u.delay = w.ownNumbers[s.rng.IntN(len(w.ownNumbers))], true, true, 20*time.Second
			} else if w.kind == repeat {
				u.phone = pool[i%len(pool)]
			} else {
				k := s.rng.IntN(len(w.ranges))
				for {
					var raw string
					if w.kind == sequential {
						raw = seqNumber(w.ranges[k], next[k])
						next[k]++
					} else {
						raw = fill(s.rng, w.ranges[k])
					}
					if p, err := otp.ParsePhone(raw, ""); err == nil {
						u.phone = p
						break
					}
				}
			}
			u.country = countryOf(u.phone)
			u.start = at
			out = append(out, u)
		}
	}
	return out
}

// seqNumber is start + i, keeping the leading "+".
func seqNumber(start string, i int64) string {
	var n int64
	fmt.Sscan(start[1:], &n)
	return "+" + fmt.Sprint(n+i)
}

func pick(r *rand.Rand, cs []country) int {
	x := r.Float64()
	for i, c := range cs {
		if x < c.share {
			return i
		}
		x -= c.share
	}
	return len(cs) - 1
}

// run simulates length of time from where the timeline is, under sc (nil:
// real traffic only), and returns one row per policy.
func (s *sim) run(sc *scenario, length time.Duration) []simRow {
	users := s.generate(sc, length)
	base := s.elapsed
	name := "history"
	if sc != nil {
		name = sc.name
	}
	rows := make([]simRow, len(s.policies))
	var wg sync.WaitGroup
	for i, p := range s.policies {
		wg.Go(func() { rows[i] = s.runPolicy(p, users, base, length, name, sc) })
	}
	wg.Wait()
	s.elapsed += length
	for _, u := range users {
		if !u.attack && u.verifies {
			s.verified[u.country] = append(s.verified[u.country], u.phone)
		}
	}
	if sc == nil {
		return nil
	}
	return rows // in the policies' order: smsgw first, then the baselines
}

// runPolicy plays the users through one policy: each user's own copy, so
// policies never see each other's outcomes.
func (s *sim) runPolicy(p policy, template []*user, base, length time.Duration, name string, sc *scenario) simRow {
	q := make(queue, 0, len(template))
	users := make([]*user, 0, len(template))
	for _, t := range template {
		u := *t
		users = append(users, &u)
		q = append(q, event{at: base + t.start, kind: evSend, u: &u})
	}
	heap.Init(&q)
	sp, concurrent := p.(*smsgwPolicy)
	row := simRow{scenario: name, policy: p.name()}
	if concurrent && !sp.challenge && sc != nil && boundRow(sc.name) {
		sp.track = newBoundTracker(sc.operator)
		defer func() { sp.track = nil }()
	}
	var from, to time.Duration
	if sc != nil {
		from, to = sc.attackWindow()
	}
	var batch []event
	flush := func() {
		if len(batch) == 0 {
			return
		}
		if concurrent {
			var wg sync.WaitGroup
			sem := make(chan struct{}, 32)
			for i := range batch {
				sem <- struct{}{}
				wg.Go(func() { defer func() { <-sem }(); s.handle(p, s.epoch.Add(batch[i].at), batch[i], &q) })
			}
			wg.Wait()
		} else {
			for i := range batch {
				s.handle(p, s.epoch.Add(batch[i].at), batch[i], &q)
			}
		}
		batch = batch[:0]
	}
	end := base + length + 10*time.Minute // let the last codes be typed
	for q.Len() > 0 {
		e := heap.Pop(&q).(event)
		if e.at >= end {
			break
		}
		// Events within one virtual minute are decided together, each at
		// its own time: the order inside a minute is the only liberty taken.
		if len(batch) > 0 && e.at/time.Minute != batch[0].at/time.Minute {
			flush()
		}
		batch = append(batch, e)
	}
	flush()
	if concurrent && sp.track != nil {
		row.bound = sp.track.result()
	}
	for _, u := range users {
		switch {
		case u.attack && u.own:
			row.decoys += u.texts
		case u.attack:
			row.attempts++
			row.texts += u.texts
			row.cost += float64(u.texts) * priceOf(u.country)
		default:
			row.users++
			row.realTexts += u.texts
			refused := 0
			if u.refusedBy != "" {
				refused = 1
			}
			if sc != nil && u.country == sc.attacked && u.start >= from && u.start < to {
				if sc.operator != "" && u.phone.Operator() == sc.operator {
					row.op++
					row.opRefused += refused
				} else {
					row.attacked++
					row.attackedRefused += refused
				}
			} else {
				row.others++
				row.othersRefused += refused
			}
			if u.refusedBy != "" {
				row.refused++
				if row.byRule == nil {
					row.byRule = map[string]int{}
				}
				row.byRule[u.refusedBy]++
			} else if u.windowed {
				row.windowed++
			}
		}
	}
	return row
}

var queueMu sync.Mutex

var simDebug = os.Getenv("SMSGW_SIM_DEBUG") != ""

func (s *sim) handle(p policy, now time.Time, e event, q *queue) {
	u := e.u
	at := e.at
	switch e.kind {
	case evSend, evResend:
		v := p.decide(now, u)
		switch {
		case v.pumping != "":
			if simDebug && !u.attack && u.refusedBy == "" && p.name() == "smsgw" {
				fmt.Fprintf(os.Stderr, "refused %s %s %s texts=%d at %s\n", u.phone.E164, u.ip, v.pumping, u.texts, at)
				g := p.(*smsgwPolicy).g
				for _, sb := range g.destination(u.phone).subjects {
					if sb.kind == 'c' {
						for _, k := range []string{sb.key, sb.foreign} {
							m, _ := g.rdb.HMGet(context.Background(), k, fieldTexts, fieldApproved, fieldRestrictedSince,
								fieldRestrictedUntil, fieldTripUsed, fieldTripBudget, fieldTripHour, fieldRefused).Result()
							fmt.Fprintf(os.Stderr, "   %s S A rs rx ru rb rh nq %v\n", k, m)
						}
					}
				}
				for _, sb := range g.caller(u.ip, u.country).subjects {
					if sb.sub != "" {
						m, _ := g.rdb.HGetAll(context.Background(), sb.sub).Result()
						cur := now.UnixMilli() / 3600000
						fmt.Fprintf(os.Stderr, "   %s S=%s A=%s s=%s,%s a=%s,%s\n", sb.id, m[fieldTexts], m[fieldApproved],
							m[fmt.Sprint(fieldTextsIn, cur)], m[fmt.Sprint(fieldTextsIn, cur-1)], m[fmt.Sprint(fieldApprovedIn, cur)], m[fmt.Sprint(fieldApprovedIn, cur-1)])
					}
				}
			}
			if u.refusedBy == "" {
				u.refusedBy = v.pumping
			}
			return
		case v.window:
			u.windowed = true
			return
		}
		u.texts++
		queueMu.Lock()
		defer queueMu.Unlock()
		if u.verifies && u.texts == 1 {
			heap.Push(q, event{at: at + u.delay, kind: evVerify, u: u})
		}
		if e.kind == evSend && u.resendIn > 0 && !u.attack && (!u.verifies || u.resendIn < u.delay) {
			heap.Push(q, event{at: at + u.resendIn, kind: evResend, u: u})
		}
	case evVerify:
		p.approved(now, u)
	}
}

// --- policies ---

// windows are smsgw's per-IP and per-phone windows, exact, in memory.
type windows struct {
	mu   sync.Mutex
	hits map[string][]time.Time
}

func newWindows() *windows { return &windows{hits: map[string][]time.Time{}} }

var ipRules = []otp.Rule{{Window: time.Minute, Max: 5}, {Window: 10 * time.Minute, Max: 30}, {Window: time.Hour, Max: 50}}
var phoneRules = []otp.Rule{{Window: time.Minute, Max: 1}, {Window: 10 * time.Minute, Max: 5}, {Window: time.Hour, Max: 10}}

// allow admits a send if both subjects have room in every window, and
// records it.
func (w *windows) allow(now time.Time, u *user) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	keys := []string{"ip:" + otp.IPKey(u.ip, 64), "phone:" + u.phone.E164}
	for i, rules := range [][]otp.Rule{ipRules, phoneRules} {
		h := w.hits[keys[i]]
		cut := 0
		for cut < len(h) && now.Sub(h[cut]) >= time.Hour {
			cut++
		}
		h = h[cut:]
		w.hits[keys[i]] = h
		for _, r := range rules {
			n := 0
			for _, t := range h {
				if now.Sub(t) < r.Window {
					n++
				}
			}
			if n >= r.Max {
				return false
			}
		}
	}
	for _, k := range keys {
		w.hits[k] = append(w.hits[k], now)
	}
	return true
}

type windowsOnly struct{ w *windows }

func (p *windowsOnly) name() string { return "windows only" }
func (p *windowsOnly) decide(now time.Time, u *user) verdict {
	return verdict{window: !p.w.allow(now, u)}
}
func (p *windowsOnly) approved(time.Time, *user) {}

// smsgwPolicy is the guard itself, on Redis, as config.toml ships it.
type smsgwPolicy struct {
	g *Guard
	w *windows
	// challenge: a refusal asks for a bot challenge instead, which the
	// user solves or not (user.solves), as otp's gate does; budgeted:
	// with pumping.challenge_budget.
	challenge, budgeted bool
	// track, while a row of the stated bound runs, notes the attack's texts.
	track *boundTracker
}

func newSmsgw(rdb redis.UniversalClient, prefix string, challenge, budgeted bool) *smsgwPolicy {
	cfg := DefaultConfig()
	cfg.ChallengeBudget = budgeted
	cfg.HoldFor = 0 // the memory of refusals is per replica; decide everything in Redis here
	// A busy machine can stall a call past the service's 1 s: the figures,
	// not the latency, are measured here.
	scripts := redisbatch.New(rdb, redisbatch.Options{Timeout: time.Minute})
	return &smsgwPolicy{g: New(rdb, prefix, cfg, Options{Clock: virtualClock, Scripts: scripts}), w: newWindows(), challenge: challenge, budgeted: budgeted}
}

func (p *smsgwPolicy) name() string {
	switch {
	case p.budgeted:
		return "smsgw + challenge, budgeted"
	case p.challenge:
		return "smsgw + challenge"
	}
	return "smsgw"
}

func (p *smsgwPolicy) decide(now time.Time, u *user) verdict {
	if !p.w.allow(now, u) {
		return verdict{window: true}
	}
	ctx := context.WithValue(context.Background(), simTime{}, now)
	var r otp.PumpingReservation
	retried(func() (err error) { r, err = p.g.Reserve(ctx, u.phone, u.ip, false); return err })
	if r.Refused != nil && p.challenge && r.Refused.Scope != "spend" && u.solves {
		retried(func() (err error) { r, err = p.g.Reserve(ctx, u.phone, u.ip, true); return err })
	}
	if r.Refused != nil {
		return verdict{pumping: r.Refused.Rule}
	}
	if simDebug && u.attack {
		p.noteServed(ctx, u.phone, u.ip, r)
	}
	if t, _ := r.Ticket.(*reservation); p.track != nil && u.attack && !u.own && t != nil && len(t.calls) > 0 {
		rep := t.calls[0].reply
		p.track.note(p, now, u, rep.countryNew, rep.signal)
	}
	return verdict{}
}

// served counts, under SMSGW_SIM_DEBUG, the attack's texts by what let them
// through: counted in the country (no sign), the caller's networks, or
// neither (a returning number or a solved challenge).
var served sync.Map

func (p *smsgwPolicy) noteServed(ctx context.Context, phone otp.Phone, ip netip.Addr, r otp.PumpingReservation) {
	t, _ := r.Ticket.(*reservation)
	if t == nil || len(t.calls) == 0 {
		return
	}
	rep := t.calls[0].reply
	k := "other"
	switch {
	case rep.countryNew&1 == 1:
		k = "unsigned"
	case rep.signal == 1:
		k = "network"
	}
	if p.name() == "smsgw" {
		fmt.Fprintf(os.Stderr, "  attack served %s %s %s: %s (signal %d, cnew %d)\n", p.g.nowCtx(ctx).Format(time.TimeOnly), phone.E164, ip, k, rep.signal, rep.countryNew)
	}
	v, _ := served.LoadOrStore(p.name()+" "+k, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func dumpServed(name string) {
	served.Range(func(k, v any) bool {
		fmt.Fprintf(os.Stderr, "  %s: attack served %s %d\n", name, k, v.(*atomic.Int64).Load())
		served.Delete(k)
		return true
	})
}
func (p *smsgwPolicy) approved(now time.Time, u *user) {
	retried(func() error { return p.g.Approved(context.WithValue(context.Background(), simTime{}, now), u.phone) })
}

// retried runs f again when another test on the shared Redis flushed the
// scripts between the batcher's reload and its second try (NOSCRIPT), and
// panics on any other error.
func retried(f func() error) {
	for i := 0; ; i++ {
		err := f()
		if err == nil {
			return
		}
		if i >= 5 || !strings.Contains(err.Error(), "NOSCRIPT") {
			panic(err)
		}
	}
}

// countryQuarantine is smsgw's previous rule: per country, over the last
// hour, at least 100 texts with under 10% approved quarantines the whole
// country for an hour.
type countryQuarantine struct {
	w    *windows
	mu   sync.Mutex
	sent map[string][]time.Time
	apr  map[string][]time.Time
	held map[string]time.Time
}

func newCountryQuarantine() *countryQuarantine {
	return &countryQuarantine{w: newWindows(), sent: map[string][]time.Time{}, apr: map[string][]time.Time{}, held: map[string]time.Time{}}
}

func (p *countryQuarantine) name() string { return "country quarantine" }
func (p *countryQuarantine) decide(now time.Time, u *user) verdict {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Before(p.held[u.country]) {
		return verdict{pumping: "country"}
	}
	if !p.w.allow(now, u) {
		return verdict{window: true}
	}
	p.sent[u.country] = append(trim(p.sent[u.country], now, time.Hour), now)
	s, a := len(p.sent[u.country]), len(trim(p.apr[u.country], now, time.Hour))
	if s >= 100 && float64(a)/float64(s) < 0.1 {
		p.held[u.country] = now.Add(time.Hour)
		p.sent[u.country], p.apr[u.country] = nil, nil
	}
	return verdict{}
}
func (p *countryQuarantine) approved(now time.Time, u *user) {
	p.mu.Lock()
	p.apr[u.country] = append(p.apr[u.country], now)
	p.mu.Unlock()
}

func trim(ts []time.Time, now time.Time, w time.Duration) []time.Time {
	i := 0
	for i < len(ts) && now.Sub(ts[i]) >= w {
		i++
	}
	return ts[i:]
}

// authgear is the rule authgear publishes: per country, unverified texts in
// the last 24 h at most max(20, 0.2 × the 14-day maximum of daily verified,
// 0.2 × verified in the last 24 h).
type authgear struct {
	w        *windows
	mu       sync.Mutex
	sent     map[string][]time.Time
	verified map[string][]time.Time
	daily    map[string]map[int]int // country → day → verified
}

func newAuthgear() *authgear {
	return &authgear{w: newWindows(), sent: map[string][]time.Time{}, verified: map[string][]time.Time{}, daily: map[string]map[int]int{}}
}

func (p *authgear) name() string { return "authgear" }
func (p *authgear) decide(now time.Time, u *user) verdict {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := u.country
	p.sent[c] = trim(p.sent[c], now, 24*time.Hour)
	p.verified[c] = trim(p.verified[c], now, 24*time.Hour)
	day := int(now.Unix() / 86400)
	peak := 0
	for d := day - 14; d < day; d++ {
		peak = max(peak, p.daily[c][d])
	}
	unverified := len(p.sent[c]) - len(p.verified[c])
	limit := max(20, 0.2*float64(peak), 0.2*float64(len(p.verified[c])))
	if float64(unverified) >= limit {
		return verdict{pumping: "authgear"}
	}
	if !p.w.allow(now, u) {
		return verdict{window: true}
	}
	p.sent[c] = append(p.sent[c], now)
	return verdict{}
}
func (p *authgear) approved(now time.Time, u *user) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.verified[u.country] = append(p.verified[u.country], now)
	if p.daily[u.country] == nil {
		p.daily[u.country] = map[int]int{}
	}
	p.daily[u.country][int(now.Unix()/86400)]++
}

// simSelected says whether SMSGW_SIM_ONLY (substrings, | between them;
// "" all) selects the scenario name.
func simSelected(name, only string) bool {
	for _, o := range strings.Split(only, "|") {
		if strings.Contains(name, o) {
			return true
		}
	}
	return false
}

// streamRows prints the last scenario's rows to stderr as they come, so a
// long run that is stopped still says what it measured.
func streamRows(rows []simRow) {
	for _, r := range rows[len(rows)-min(len(rows), 6):] {
		if r.scenario == rows[len(rows)-1].scenario {
			fmt.Fprint(os.Stderr, "  row "+simLine(r))
			if r.bound != nil {
				fmt.Fprint(os.Stderr, "  bound "+boundLine(r))
			}
		}
	}
}

func simLine(r simRow) string {
	op, opRefused := "", ""
	if r.op > 0 {
		op, opRefused = fmt.Sprint(r.op), fmt.Sprint(r.opRefused)
	}
	return fmt.Sprintf("| %s | %s | %d | %d | %.2f%% | %.2f | %d | %d | %.3f%% | %d | %d | %.2f%% | %s | %s | %d | %d |\n", r.scenario, r.policy, r.attempts, r.texts,
		100*r.attackShare(), r.cost, r.users, r.refused, 100*r.userShare(), r.attacked, r.attackedRefused, 100*r.attackedShare(),
		op, opRefused, r.othersRefused, r.windowed)
}

func printSim(rows []simRow, took time.Duration, rate float64) {
	fmt.Printf("\nSMS pumping simulation (%s; real traffic %.2f users/s on average)\n\n", took.Round(time.Second), rate)
	fmt.Printf("| scenario | policy | attack attempts | attack texts | share | cost | real users | refused by a pumping rule | share | attacked country's users during the attack (operator rows: its other operators') | refused | share | attacked operator's users | refused | other users refused | refused by windows (CGNAT) |\n")
	fmt.Printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Print(simLine(r))
	}
	fmt.Println()
	for _, r := range rows {
		if strings.HasPrefix(r.policy, "smsgw") && len(r.byRule) > 0 {
			fmt.Printf("%s, %s: real users refused by rule %v\n", r.policy, r.scenario, r.byRule)
		}
	}
}
