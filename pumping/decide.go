package pumping

import (
	"fmt"
	"strconv"
	"time"
)

// The protocol of decide.lua, which decides the pumping rules of one send
// for one group of subjects (one hash tag) and counts the send when they
// pass, atomically. decide.lua's header explains the model (buckets,
// budgets, the country's restriction); this is the one place that says what
// goes in and what comes back.
//
// KEYS are group.keys(): the phone's record when the group has one, then
// per subject its keys, read in order by the kinds in ARGV (see
// decideSubject).
//
// ARGV, 1-based as Lua reads it, is decideArgs.argv():
//
//	[1]  now in ms, or "" for Redis TIME (only the simulation passes one)
//	[2]  bucket_ms
//	[3]  nb: buckets in the window
//	[4]  a decideMode
//	[5]  ratio, exact as Go's shortest formatting
//	[6]  hour_factor
//	[7]  restrict_ms: how long a country stays restricted once over budget
//	[8]  the phone (E.164), for the record
//	[9]  the caller's network id, kept in the phone's record so that an
//	     approval credits the networks that asked for the text
//	[10] the number of subjects
//	[11] "1" when KEYS[1] is the phone's record (the destination group, even
//	     with no range or country rule on, so an approval can find the
//	     networks to credit)
//	[12] probe_ms: a network over its budget still admits one send this
//	     often, counted from its first refusal (0: never). A shared address
//	     (a carrier's CGNAT) whose first users did not verify would otherwise
//	     refuse everyone behind it for a whole window; one probe per period
//	     lets real users earn it back, and costs an attacker a text.
//	[13] the caller networks' signal for the country: "" read it from the
//	     network subjects of this call (one primary); "1", "2" (known
//	     abroad) or "0" as the caller's own call reported it (Cluster); "?"
//	     not known yet (a
//	     restricted country's refusal then says so, verdictAskAgain, and
//	     writes nothing, so the guard asks again with the answer)
//	[14] "tail days": the phone's last four digits (its field in the
//	     returning block), then the days a returning number's approval counts
//	[15...] per subject a triple kind, p1, p2 (decideSubject)
//
// The reply is decideReplyLen integers at the decideReply* positions, read
// by parseDecideReply. A refusal (verdictRefused, verdictAskAgain) counts
// nothing; release.lua takes back what a counted call counted.
type decideArgs struct {
	now         any // "" (Redis TIME) or ms
	bucket      time.Duration
	buckets     int64
	mode        decideMode
	ratio       float64
	hourFactor  float64
	restrictFor time.Duration
	phone       string
	netid       string
	record      bool
	probeEvery  time.Duration
	signal      string
	tail        string
	// returningDays is how many days a returning number's approval counts.
	returningDays int64
	subjects      []decideSubject
	// head, when set, is the guard's arguments above already in
	// interfaces (decideHead): argv then boxes only the send's own.
	head *decideHead
}

// decideSubject is one subject's triple, by kind:
//
//	"r" range: counts distinct phones (the record says whether this phone is
//	    already counted); p1 floor; keys: 1
//	"c" country, or operator (the same rules, its own keys, listed before
//	    its country): counts distinct phones without a sign of a real user; p1
//	    floor; p2 "1" when solved challenges are held to their ledger's
//	    budget (else "0"), then "o" for an operator; keys: 4 (the country hash, its ledger of sends that passed
//	    with a solved challenge, the phone's returning block, its ledger of
//	    unsigned sends from networks known abroad)
//	"n" network: counts every text; p1 floor; keys: 1
//	"N" network, a signal level: as "n", and its ledger of texts to the
//	    destination country; keys: 2
//	"m" money: the spend ledger; p1 the text's price (micro-units), p2
//	    "hour_budget day_budget" (0: none); keys: 1
type decideSubject struct {
	kind   string
	p1, p2 any
}

// The ARGV positions the Go side knows by number (1-based).
const (
	decideArgSubjects = 15 // the first subject's kind
)

// decideMode is how decide.lua treats a rule that would refuse.
type decideMode int

const (
	modeEnforce decideMode = 0 // count only if every rule passes
	modeShadow  decideMode = 1 // decide, count anyway, report what would refuse
	// modeBypass counts and decides only the spend ledger: a solved
	// challenge passes the pumping rules, not the money budgets.
	modeBypass decideMode = 2
)

func (a decideArgs) argv() []any {
	argv := make([]any, 0, decideArgSubjects-1+3*len(a.subjects))
	if h := a.head; h != nil {
		argv = append(argv, a.now, h.bucket, h.buckets, int(a.mode), h.ratio, h.hourFactor,
			h.restrictFor, a.phone, a.netid, len(a.subjects), boxedFlag(a.record), h.probeEvery,
			boxedSignal(a.signal), a.tail+h.days)
	} else {
		argv = append(argv, a.now, ms(a.bucket), a.buckets, int(a.mode),
			strconv.FormatFloat(a.ratio, 'g', -1, 64), strconv.FormatFloat(a.hourFactor, 'g', -1, 64),
			ms(a.restrictFor), a.phone, a.netid, len(a.subjects), flag(a.record), ms(a.probeEvery),
			a.signal, a.tail+" "+strconv.FormatInt(a.returningDays, 10))
	}
	for _, s := range a.subjects {
		argv = append(argv, boxedKind(s.kind), s.p1, s.p2)
	}
	return argv
}

// decideHead is what a guard's every decideArgs holds alike, made once
// (newDecideHead) in the types argv gives them, boxed: a send then
// allocates only for its own arguments.
type decideHead struct {
	bucket, buckets, ratio, hourFactor, restrictFor, probeEvery any
	// days is " " and the returning days, after the phone's tail.
	days string
	// countryP2 is a country's p2 by [challenge budget][operator];
	// spendP2 the spend ledger's.
	countryP2 [2][2]any
	spendP2   any
}

func newDecideHead(a decideArgs, challengeBudget bool, spendP2 string) *decideHead {
	h := &decideHead{bucket: ms(a.bucket), buckets: a.buckets, ratio: strconv.FormatFloat(a.ratio, 'g', -1, 64),
		hourFactor: strconv.FormatFloat(a.hourFactor, 'g', -1, 64), restrictFor: ms(a.restrictFor),
		probeEvery: ms(a.probeEvery), days: " " + strconv.FormatInt(a.returningDays, 10), spendP2: spendP2}
	for op := range 2 {
		p2 := flag(challengeBudget)
		if op == 1 {
			p2 += "o"
		}
		h.countryP2[btoi(challengeBudget)][op] = p2
	}
	return h
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// boxedFlag is flag(b) in an interface: a constant's costs no allocation,
// a string's made at run time one.
func boxedFlag(b bool) any {
	if b {
		return "1"
	}
	return "0"
}

// boxedSignal is signal in an interface, without an allocation for the
// signals there are.
func boxedSignal(signal string) any {
	switch signal {
	case "1":
		return "1"
	case "2":
		return "2"
	case "0":
		return "0"
	case "?":
		return "?"
	}
	return signal
}

// boxedKind is a subject's kind in an interface, without an allocation
// for the kinds there are.
func boxedKind(kind string) any {
	switch kind {
	case "r":
		return "r"
	case "c":
		return "c"
	case "n":
		return "n"
	case "N":
		return "N"
	case "m":
		return "m"
	}
	return kind
}

// decideVerdict is the reply's first integer.
type decideVerdict int64

const (
	verdictRefused decideVerdict = 0 // a rule refused; nothing was counted
	verdictCounted decideVerdict = 1
	verdictShadow  decideVerdict = 2 // counted although a rule would refuse (modeShadow)
	// verdictAskAgain: a restricted country needs the caller's signal,
	// which the call was not told (Cluster); nothing was counted.
	verdictAskAgain decideVerdict = 3
)

// counted says whether the call counted the send (and a release owes it).
func (v decideVerdict) counted() bool { return v == verdictCounted || v == verdictShadow }

// Positions in decide.lua's reply (0-based, as Go reads it).
const (
	decideReplyVerdict    = iota
	decideReplyRule       // the refusing (or, shadow, would-refuse) subject, 1-based; 0 none
	decideReplyUsed       // its unverified texts (money in micro-units)
	decideReplyBudget     // its budget
	decideReplyRetry      // ms until it has room if nothing is approved
	decideReplyNear       // the subject closest to its budget, 1-based; 0 all under half
	decideReplyNearUsed   // its unverified texts
	decideReplyNearBudget // its budget
	decideReplyBucket     // the bucket counted in, for release.lua
	decideReplyNew        // 1 when the phone was counted anew, 2 a resend past the free ones counted again
	decideReplySignal     // the caller networks' signal: 1 good, 2 known abroad, 0 none, -1 not asked
	decideReplyCountryNew // what the country (and its operator, alike) counted anew, bits: 1 the phone, 2 its challenge ledger, 4 its foreign networks' ledger
	decideReplyLen
)

// decideReply is decide.lua's reply, read.
type decideReply struct {
	verdict              decideVerdict
	rule                 int
	used, budget         int64
	retry                time.Duration
	near                 int
	nearUsed, nearBudget int64
	bucket               int64
	recorded             int64 // decideReplyNew
	signal               int64
	countryNew           int64
}

// parseDecideReply reads decide.lua's reply to a call over subjects
// subjects.
func parseDecideReply(v any, subjects int) (decideReply, error) {
	vals, ok := v.([]any)
	if !ok || len(vals) != decideReplyLen {
		return decideReply{}, fmt.Errorf("unexpected reply %v", v)
	}
	var n [decideReplyLen]int64
	for i, x := range vals {
		if n[i], ok = x.(int64); !ok {
			return decideReply{}, fmt.Errorf("unexpected reply %v", v)
		}
	}
	r := decideReply{
		verdict: decideVerdict(n[decideReplyVerdict]), rule: int(n[decideReplyRule]),
		used: n[decideReplyUsed], budget: n[decideReplyBudget], retry: time.Duration(n[decideReplyRetry]) * time.Millisecond,
		near: int(n[decideReplyNear]), nearUsed: n[decideReplyNearUsed], nearBudget: n[decideReplyNearBudget],
		bucket: n[decideReplyBucket], recorded: n[decideReplyNew], signal: n[decideReplySignal],
		countryNew: n[decideReplyCountryNew],
	}
	if r.verdict < verdictRefused || r.verdict > verdictAskAgain || r.rule < 0 || r.rule > subjects ||
		r.near < 0 || r.near > subjects || r.recorded < 0 || r.recorded > 2 || (r.verdict != verdictCounted && r.rule == 0) {
		return decideReply{}, fmt.Errorf("unexpected reply %v", v)
	}
	return r, nil
}
