package admission

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/codestore"
	"smsgw/internal/redisbatch"
	"smsgw/otp"
	"smsgw/pumping"
	"smsgw/ratelimit"
)

// Scripts runs Redis scripts (redisbatch.Scripts, one interface for every
// package that runs them).
type Scripts = redisbatch.Scripts

// Admitter is an otp.SendAdmitter over the parts' own stores: what it
// counts and stores, their Refund, Release, Check and Settle read.
type Admitter struct {
	stores
}

// stores are the composed script, what runs it and the parts' stores:
// what Admitter and ClusterAdmitter share.
type stores struct {
	scripts     Scripts
	script      *redis.Script
	limiter     *ratelimit.Limiter
	guard       *pumping.Guard
	codes       *codestore.Store
	idempotency *codestore.Idempotency
}

var (
	_ otp.SendAdmitter  = (*Admitter)(nil)
	_ otp.RefusalMemory = (*Admitter)(nil)
	_ otp.RefusalMemory = (*ClusterAdmitter)(nil)
)

// New composes the script (once: a part's script changes with its
// package). The parts must share one Redis primary with scripts.
func New(scripts Scripts, limiter *ratelimit.Limiter, guard *pumping.Guard, codes *codestore.Store, idempotency *codestore.Idempotency) *Admitter {
	return &Admitter{stores{scripts: scripts, script: redis.NewScript(composed), limiter: limiter, guard: guard,
		codes: codes, idempotency: idempotency}}
}

// Admit runs every part the admission asks for in one script call.
func (a *Admitter) Admit(ctx context.Context, adm otp.Admission) (otp.Admitted, error) {
	return a.admit(ctx, adm, func() (pumpingPart, error) {
		d, err := a.guard.Decision(ctx, adm.Phone, adm.ClientIP, adm.Bypass)
		return onePumping(a.guard, d, nil), err
	})
}

// AdmitDecided is Admit with the pumping decision prepared by the caller:
// a region sending to a number homed on this Redis decides the caller's
// groups at home first (pumping.Guard.HomeDecision). It does not Abandon
// the decision when the script stops before it.
func (a *Admitter) AdmitDecided(ctx context.Context, adm otp.Admission, decision pumping.Decision) (otp.Admitted, error) {
	return a.admit(ctx, adm, func() (pumpingPart, error) { return onePumping(a.guard, decision, nil), nil })
}

func (a *Admitter) admit(ctx context.Context, adm otp.Admission, prepare func() (pumpingPart, error)) (otp.Admitted, error) {
	out := otp.Admitted{Claim: otp.Claimed}
	var parts slots
	var claim *claimPart
	if adm.Scope != "" {
		claim = &claimPart{}
		claim.keys, claim.args = a.idempotency.ClaimCall(adm.Scope, adm.Ticket, adm.ClaimTTL)
		parts.put(claim)
	}
	w, err := a.limiter.Windows(adm.Ticket, adm.Subjects)
	if err != nil {
		return out, err
	}
	var (
		pump    pumpingPart
		windows *windowsPart
		issue   *issuePart
	)
	if d, ok := w.Decided(); ok {
		out.Decision, out.Limited = d, true
	}
	if !out.Limited || out.Decision.Allowed {
		// The windows and the code in one allocation.
		both := &struct {
			windows windowsPart
			issue   issuePart
		}{windows: windowsPart{w: w, undo: true}}
		windows = &both.windows
		parts.put(windows)
		if adm.Pumping {
			if pump, err = prepare(); err != nil {
				return out, err
			}
			for _, d := range pump.decides {
				parts.put(d) // one at most: one primary is one tag
			}
		}
		issue = &both.issue
		issue.keys, issue.args = a.codes.IssueCall(adm.Phone.E164, adm.Code, adm.CodeTTL)
		parts.put(issue)
	}
	if claim == nil && issue == nil {
		return out, nil // refused from memory, nothing to claim
	}
	keys, args := layout(parts[:], false)
	cmd := a.scripts.Run(ctx, a.script, keys, args...)
	var notReplicated *redisbatch.NotReplicatedError
	if err := cmd.Err(); err != nil && !errors.As(err, &notReplicated) {
		return out, fmt.Errorf("admission: %w", err)
	}
	out, err = a.read(ctx, out, &parts, claim, windows, pump, issue, cmd.Val())
	if err != nil {
		return out, fmt.Errorf("admission: %w", err)
	}
	if notReplicated != nil {
		return out, a.failClosed(ctx, notReplicated, adm, out)
	}
	return out, nil
}

// read hands each part that ran its reply, then concludes, up to the part
// that stopped the script.
func (a *Admitter) read(ctx context.Context, out otp.Admitted, parts *slots, claim *claimPart, windows *windowsPart,
	pump pumpingPart, issue *issuePart, v any) (otp.Admitted, error) {
	r, err := split(v, nScripts)
	if err != nil {
		return out, err
	}
	errs := r.read(parts[:])
	if claim != nil {
		out.Claim, out.Prior = claim.claim, claim.prior
		if err := errs[claimScript.at]; err != nil || out.Claim != otp.Claimed {
			return out, err
		}
	}
	if windows != nil && r.ran[allowScript.at] {
		if err := errs[allowScript.at]; err != nil {
			return out, err
		}
		out.Decision, out.Limited = windows.decision, true
	}
	if out.Limited && !out.Decision.Allowed {
		return out, nil
	}
	// Also when its call did not run: what a region decided at home first.
	if out.Pumping, err = pump.read(ctx); err != nil || out.Pumping.Refused != nil {
		return out, err
	}
	if issue == nil || !r.ran[issueScript.at] {
		return out, fmt.Errorf("unexpected code reply %v", v)
	}
	if err := errs[issueScript.at]; err != nil {
		return out, err
	}
	out.Pending, out.Issued = issue.pending, true
	return out, nil
}

// AdmitRefused answers a send another region refused before its home was
// asked (its own windows or the caller's pumping groups there). A keyed
// send runs the composed call with the claim part only first: a replay or
// a duplicate in flight is answered before the refusal, as when the claim
// is the first part of the whole call (a retry's window is full of the
// send it retries). Claimed, the refusal is the answer and the claim the
// caller's to settle.
func (s stores) AdmitRefused(ctx context.Context, adm otp.Admission, refused otp.Admitted) (otp.Admitted, error) {
	if adm.Scope == "" {
		return refused, nil
	}
	var parts slots
	claim := &claimPart{}
	claim.keys, claim.args = s.idempotency.ClaimCall(adm.Scope, adm.Ticket, adm.ClaimTTL)
	parts.put(claim)
	keys, args := layout(parts[:], false)
	out := otp.Admitted{Claim: otp.Claimed}
	v, err := s.scripts.Run(ctx, s.script, keys, args...).Result()
	if err != nil {
		return out, fmt.Errorf("admission: %w", err)
	}
	r, err := split(v, nScripts)
	if err != nil {
		return out, fmt.Errorf("admission: %w", err)
	}
	errs := r.read(parts[:])
	if !claim.ran {
		return out, fmt.Errorf("admission: unexpected claim reply %v", v)
	}
	if err := errs[claimScript.at]; err != nil {
		return out, fmt.Errorf("admission: %w", err)
	}
	if claim.claim != otp.Claimed {
		return otp.Admitted{Claim: claim.claim, Prior: claim.prior}, nil
	}
	refused.Claim = otp.Claimed
	return refused, nil
}

// Remembered is a refusal of subjects the windows remember, answered
// without Redis (otp.RefusalMemory): what Admit would answer.
func (s stores) Remembered(subjects []otp.Subject) (otp.Decision, bool) {
	return s.limiter.Remembered(subjects)
}

// Undo takes back what an admission counted and stored (the claim is the
// caller's to settle), within ctx: the caller bounds it.
func (s stores) Undo(ctx context.Context, adm otp.Admission, out otp.Admitted) error {
	var errs []error
	if out.Limited && out.Decision.Allowed && len(adm.Subjects) > 0 {
		errs = append(errs, s.limiter.Refund(ctx, adm.Ticket, adm.Subjects))
	}
	errs = append(errs, s.guard.Release(ctx, out.Pumping))
	if out.Issued && out.Pending == nil {
		errs = append(errs, s.codes.Discard(ctx, adm.Phone.E164, adm.Code.MAC))
	}
	return errors.Join(errs...)
}

// failClosed takes back an admission done on the primaries whose replicas
// did not acknowledge it in time (notReplicated): a failover could forget
// it, so the send fails closed rather than text on a record that may
// vanish.
func (s stores) failClosed(ctx context.Context, notReplicated error, adm otp.Admission, out otp.Admitted) error {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	return fmt.Errorf("admission: %w", errors.Join(notReplicated, s.Undo(uctx, adm, out)))
}
