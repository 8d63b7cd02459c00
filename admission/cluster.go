package admission

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/codestore"
	"smsgw/internal/hashslot"
	"smsgw/internal/redisbatch"
	"smsgw/otp"
	"smsgw/pumping"
	"smsgw/ratelimit"
)

// ClusterAdmitter is an otp.SendAdmitter on Redis Cluster: a send's keys
// span hash tags (the phone's windows, the address's, each pumping group's,
// the code's), and no script can see two slots. It runs one composed
// script per slot, every slot at once (in one pipeline, split by shard):
// one round trip of latency. Each
// slot's script decides its own windows (for good, not as a reservation),
// its pumping groups and, on the code's slot, issues the code; when any
// slot refuses, what the others counted is taken back by the release paths
// the parts already have (Limiter.Refund, Guard.Release).
//
// No window ever holds more than its max, so nothing is admitted over a
// limit; a send refused on one slot may for a moment hold quota on another,
// and a replica dying before its release leaves that quota used (a refusal
// too early, never an admission too many), as a failed refund does.
//
// The idempotency claim, when the send has a key, runs in the same round:
// its key shares the number's per-phone hash tag (codestore.Idempotency),
// so it is the first part of that slot's script, and a duplicate in flight
// or a replay counts nothing in the number's windows. What such a request
// counted on the other slots (the address's windows, the pumping groups)
// is taken back as after a refusal; until then it holds one unit of each
// for about a round trip, and the holder a window refused meanwhile asks
// again once they gave back (Admit; docs/redis.md, "What runs in order").
// The code is issued in the same round as the decisions, so a send refused
// on another slot (or a duplicate) leaves a new code pending untexted (the
// next admitted send texts it) or renews a pending code's expiry; it never
// deletes one, which another send may have texted.
type ClusterAdmitter struct {
	stores
	log *slog.Logger
}

var _ otp.SendAdmitter = (*ClusterAdmitter)(nil)

// NewCluster composes the per-slot script. The parts must share one Redis
// Cluster with scripts.
func NewCluster(scripts Scripts, limiter *ratelimit.Limiter, guard *pumping.Guard, codes *codestore.Store, idempotency *codestore.Idempotency, log *slog.Logger) *ClusterAdmitter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &ClusterAdmitter{stores: stores{scripts: scripts, script: redis.NewScript(composed), limiter: limiter,
		guard: guard, codes: codes, idempotency: idempotency}, log: log}
}

func (a *ClusterAdmitter) tagged(ctx context.Context, adm otp.Admission) pumpingPart {
	return tagPumping(a.guard.TagDecisions(ctx, adm.Phone, adm.ClientIP, adm.Bypass))
}

// Admit runs the send's parts in one composed script per slot, the slots
// in parallel, the idempotency claim (when keyed) with the number's
// windows.
func (a *ClusterAdmitter) Admit(ctx context.Context, adm otp.Admission) (otp.Admitted, error) {
	first := &try{counted: true}
	out, err := a.admit(ctx, adm, a.tagged, first)
	scope := adm.Scope
	adm.Scope = "" // held from here, when claimed
	for round := 1; round < maxRounds; round++ {
		if err != nil || scope == "" || out.Claim != otp.Claimed || !out.Limited || out.Decision.Allowed || first.remembered {
			return out, err
		}
		// Refused by a window while holding the claim: perhaps by what
		// its duplicates in flight counted on another slot. Once they
		// gave back, ask again, from Redis: once in any case (a duplicate
		// may count before its claim call lands), again while duplicates
		// were still counted.
		if !a.duplicatesGaveBack(ctx, scope) && round > 1 {
			return out, nil
		}
		out, err = a.admit(ctx, adm, a.tagged, &try{asked: true})
	}
	return out, err
}

// maxRounds bounds the rounds of a keyed send refused while its
// duplicates gave back.
const maxRounds = 3

// duplicatesGaveBack waits until the requests that found scope's claim
// held gave back what they counted (at most their give-back's timeout),
// and reports whether there were any.
func (a *ClusterAdmitter) duplicatesGaveBack(ctx context.Context, scope string) bool {
	n, err := a.idempotency.Duplicates(ctx, scope)
	if err != nil || n <= 0 {
		return false
	}
	deadline := time.Now().Add(giveBackTimeout)
	for n > 0 && err == nil && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(5 * time.Millisecond):
		}
		n, err = a.idempotency.Duplicates(ctx, scope)
	}
	return true
}

// giveBackTimeout bounds taking back what a refused send counted.
const giveBackTimeout = time.Second

// AdmitDecided is Admit with the pumping decision prepared by the caller
// (a region sending to a number homed on this Cluster decided the caller's
// groups at home first; Keys and Args are the destination group's call).
// It does not Abandon the decision when the call did not run.
func (a *ClusterAdmitter) AdmitDecided(ctx context.Context, adm otp.Admission, decision pumping.Decision) (otp.Admitted, error) {
	return a.admit(ctx, adm, func(context.Context, otp.Admission) pumpingPart {
		return onePumping(a.guard, decision, a.warn)
	}, &try{})
}

// unit is one composed script call: parts whose keys share a slot.
type unit struct {
	slot  uint16
	parts slots
	ran   *replies // nil: no reply to read
	errs  [nScripts]error
	err   error
}

// sent are a send's parts, as admit laid them out over units: windows in
// the order of the windows groups.
type sent struct {
	claim   *claimPart
	windows []*windowsPart
	pumping pumpingPart
	issue   *issuePart
}

// try is how admit asks.
type try struct {
	// asked skips the refusals this replica remembers; counted has
	// claim.lua count a duplicate, for a holder that waits for it (Admit).
	asked, counted bool
	// remembered, set by admit: refused from this replica's memory.
	remembered bool
}

// admit runs the send's calls.
func (a *ClusterAdmitter) admit(ctx context.Context, adm otp.Admission, prepare func(context.Context, otp.Admission) pumpingPart, t *try) (otp.Admitted, error) {
	out := otp.Admitted{Claim: otp.Claimed}
	groups, subjects, remembered, err := a.windowGroups(adm, t.asked)
	if err != nil {
		return out, err
	}
	var units []*unit
	place := func(p Part) {
		slot := hashslot.Of(p.Keys()[0])
		for _, u := range units {
			if u.slot == slot && u.parts.free(p.Script()) {
				u.parts.put(p)
				return
			}
		}
		u := &unit{slot: slot}
		u.parts.put(p)
		units = append(units, u)
	}
	var parts sent
	if adm.Scope != "" {
		// First, so the number's windows (same tag) join its unit. A
		// duplicate is counted when it will count elsewhere.
		claim := a.idempotency.ClaimCall
		if t.counted && remembered == nil {
			claim = a.idempotency.CountingClaimCall
		}
		parts.claim = &claimPart{}
		parts.claim.keys, parts.claim.args = claim(adm.Scope, adm.Ticket, adm.ClaimTTL)
		place(parts.claim)
	}
	t.remembered = remembered != nil
	if remembered != nil {
		// Refused from memory: a keyed send still answers its replay
		// first, so only the claim is asked.
		out.Decision, out.Limited = *remembered, true
		if len(units) == 0 {
			return out, nil
		}
		a.run(ctx, units)
		u := units[0]
		if u.err != nil {
			return out, fmt.Errorf("admission: %w", u.err)
		}
		out.Claim, out.Prior, err = parts.claim.claim, parts.claim.prior, u.errs[claimScript.at]
		if err != nil || out.Claim != otp.Claimed {
			return otp.Admitted{Claim: out.Claim, Prior: out.Prior}, wrap(err)
		}
		return out, nil
	}
	for _, w := range groups {
		p := &windowsPart{w: w}
		parts.windows = append(parts.windows, p)
		place(p)
	}
	if adm.Pumping {
		parts.pumping = prepare(ctx, adm)
		for _, p := range parts.pumping.decides {
			place(p)
		}
	}
	parts.issue = &issuePart{}
	parts.issue.keys, parts.issue.args = a.codes.IssueCall(adm.Phone.E164, adm.Code, adm.CodeTTL)
	place(parts.issue)
	a.run(ctx, units)
	return a.read(ctx, adm, out, units, groups, subjects, parts, t)
}

// wrap marks an error as this package's (nil stays nil).
func wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("admission: %w", err)
}

// windowGroups prepares the windows as one allow.lua call per slot, or
// answers a refusal this replica remembers.
func (a *ClusterAdmitter) windowGroups(adm otp.Admission, asked bool) ([]ratelimit.Windows, [][]otp.Subject, *otp.Decision, error) {
	windows := a.limiter.Windows
	if asked {
		windows = a.limiter.WindowsAsked
	}
	var bySlot hashslot.Groups[otp.Subject]
	for _, s := range adm.Subjects {
		w, err := windows(adm.Ticket, []otp.Subject{s})
		if err != nil {
			return nil, nil, nil, err
		}
		if d, ok := w.Decided(); ok {
			if !d.Allowed {
				d.Policies = ratelimit.PoliciesOf(adm.Subjects)
				return nil, nil, &d, nil
			}
			continue
		}
		bySlot.Add(hashslot.Of(w.Keys[0]), s)
	}
	groups := make([]ratelimit.Windows, len(bySlot.List()))
	for i, subjects := range bySlot.List() {
		var err error
		if groups[i], err = windows(adm.Ticket, subjects); err != nil {
			return nil, nil, nil, err
		}
		// A refusal another request noted since the loop above.
		if d, ok := groups[i].Decided(); ok {
			d.Policies = ratelimit.PoliciesOf(adm.Subjects)
			return nil, nil, &d, nil
		}
	}
	return groups, bySlot.List(), nil, nil
}

// allAtOnce runs several calls so that they leave in one pipeline
// (*redisbatch.Batcher): on a Cluster, split by shard, every shard at once.
type allAtOnce interface {
	RunAll(ctx context.Context, calls []redisbatch.Call) []*redis.Cmd
}

// run makes every unit's call at once: in one pipeline when the scripts
// can (a call made on its own could wait behind another's pipeline for a
// round trip), else each from its own goroutine.
func (a *ClusterAdmitter) run(ctx context.Context, units []*unit) {
	calls := make([]redisbatch.Call, len(units))
	for i, u := range units {
		keys, args := layout(u.parts[:], true)
		calls[i] = redisbatch.Call{Script: a.script, Keys: keys, Args: args}
	}
	cmds := make([]*redis.Cmd, len(units))
	if all, ok := a.scripts.(allAtOnce); ok {
		cmds = all.RunAll(ctx, calls)
	} else {
		var wg sync.WaitGroup
		for i, c := range calls {
			wg.Go(func() { cmds[i] = a.scripts.Run(ctx, c.Script, c.Keys, c.Args...) })
		}
		wg.Wait()
	}
	for i, u := range units {
		v, err := cmds[i].Result()
		var notReplicated *redisbatch.NotReplicatedError
		if err == nil || errors.As(err, &notReplicated) {
			if r, perr := split(v, nScripts); perr != nil {
				err = errors.Join(err, perr)
			} else {
				u.ran, u.errs = &r, r.read(u.parts[:])
			}
		}
		u.err = err
	}
}

func (a *ClusterAdmitter) warn(ctx context.Context, err error) {
	a.log.WarnContext(ctx, "taking back a send refused on another slot failed; the quota stays used", "err", err)
}
