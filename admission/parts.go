package admission

// The parts of a send, each a Part over what its package exposes: its
// script, when its reply stops the composed script, its call and its
// reply reader. Whatever a reply means is read by the part's package.

import (
	"context"

	"smsgw/codestore"
	"smsgw/otp"
	"smsgw/pumping"
	"smsgw/ratelimit"
)

var (
	claimScript   = &Script{Name: "claim", Source: codestore.ClaimLua, Stops: codestore.ClaimStops}
	allowScript   = &Script{Name: "allow", Source: ratelimit.AllowLua, Stops: ratelimit.AllowStops, Undo: releaseScript}
	releaseScript = &Script{Name: "release", Source: ratelimit.SettleLua}
	decideScript  = &Script{Name: "decide", Source: pumping.DecideLua, Stops: pumping.DecideStops}
	issueScript   = &Script{Name: "issue", Source: codestore.IssueLua}
)

// call is a part's keys and arguments.
type call struct {
	keys []string
	args []any
}

func (c call) Keys() []string { return c.keys }
func (c call) Args() []any    { return c.args }

// claimPart is the idempotency claim (codestore.Idempotency).
type claimPart struct {
	call
	claim otp.Claim
	prior []byte
	ran   bool
	err   error
}

func (*claimPart) Script() *Script { return claimScript }

func (p *claimPart) Read(v any) error {
	p.claim, p.prior, p.err = codestore.ReadClaim(v)
	p.ran = true
	return p.err
}

// windowsPart is every window of its subjects on one tag
// (ratelimit.Windows); with undo, settle.lua's release takes it back when
// a later part stops the script.
type windowsPart struct {
	w        ratelimit.Windows
	undo     bool
	decision otp.Decision
	ran      bool
	err      error
}

func (*windowsPart) Script() *Script  { return allowScript }
func (p *windowsPart) Keys() []string { return p.w.Keys }
func (p *windowsPart) Args() []any    { return p.w.Args }

func (p *windowsPart) Undo() ([]string, []any) {
	if !p.undo {
		return nil, nil
	}
	return p.w.UndoKeys, p.w.UndoArgs
}

func (p *windowsPart) Read(v any) error {
	p.decision, p.err = p.w.Read(v)
	p.ran = true
	return p.err
}

// decidePart is one decide.lua call of a pumpingPart. Its reply is kept
// for the pumping side's reader, which concludes over every call of the
// send at once.
type decidePart struct {
	call
	reply any
	ran   bool
}

func (*decidePart) Script() *Script { return decideScript }

func (p *decidePart) Read(v any) error {
	p.reply, p.ran = v, true
	return nil
}

// issuePart is the code (codestore.Store).
type issuePart struct {
	call
	pending []byte
	ran     bool
	err     error
}

func (*issuePart) Script() *Script { return issueScript }

func (p *issuePart) Read(v any) error {
	p.pending, p.err = codestore.ReadIssue(v)
	p.ran = true
	return p.err
}

// pumpingPart is a send's pumping decision as decide.lua calls, one per
// hash tag (none when no rule applies), and what concludes them. The
// composers lay the calls out, then read or abandon the part as a whole;
// what a decision is, and how to take it back, only its constructors
// below know (pumping's API).
type pumpingPart struct {
	decides []*decidePart
	// conclude reads the reservation from the calls' replies (nil: did
	// not run) once every part ran; nil when the send asked no pumping.
	conclude func(ctx context.Context, replies []any) (otp.PumpingReservation, error)
	// abandon, when another part refused or failed, reads what ran and
	// returns what takes it back (nil: nothing), for the composer to run
	// now or after its answer.
	abandon func(ctx context.Context, replies []any) (release func())
	// one, when set, is a decision prepared as one call (onePumping),
	// read in place of conclude and abandon: one allocation, not four.
	one *onePumped
}

// replies are the calls' replies, nil for a call that did not run.
func (p pumpingPart) replies() []any {
	out := make([]any, len(p.decides))
	for i, d := range p.decides {
		out[i] = d.reply
	}
	return out
}

// read concludes the reservation.
func (p pumpingPart) read(ctx context.Context) (otp.PumpingReservation, error) {
	if o := p.one; o != nil {
		var v any
		if len(p.decides) > 0 {
			v = p.decides[0].reply
		}
		return o.d.Read(ctx, v)
	}
	if p.conclude == nil {
		return otp.PumpingReservation{}, nil
	}
	return p.conclude(ctx, p.replies())
}

// release abandons the part: what takes back what it counted, or nil.
func (p pumpingPart) release(ctx context.Context) func() {
	if p.one != nil {
		return p.one.release(ctx, p.decides)
	}
	if p.abandon == nil {
		return nil
	}
	return p.abandon(ctx, p.replies())
}

// tagPumping is the decision on Redis Cluster as one call per hash tag
// (pumping.Guard.TagDecisions).
func tagPumping(d pumping.TagDecisions) pumpingPart {
	p := pumpingPart{conclude: d.Read, abandon: func(ctx context.Context, replies []any) func() {
		return func() { d.Abandon(ctx, replies) }
	}}
	for _, c := range d.Calls {
		p.decides = append(p.decides, &decidePart{call: call{c.Keys, c.Args}})
	}
	return p
}

// onePumping is a decision prepared as one call: pumping.Guard.Decision
// on one primary, or a region's pumping.Guard.HomeDecision, whose caller
// decided its own groups first and abandons them when the call does not
// run. What the call counted, abandon releases (warn hears a failure).
func onePumping(g *pumping.Guard, d pumping.Decision, warn func(context.Context, error)) pumpingPart {
	o := &onePumped{g: g, d: d, warn: warn}
	p := pumpingPart{one: o}
	if d.Keys == nil {
		return p // nothing to decide or count: only what the caller decided
	}
	o.part.call = call{d.Keys, d.Args}
	o.slot[0] = &o.part
	p.decides = o.slot[:]
	return p
}

// onePumped is onePumping's part: the decision, its one call and what
// reads it, in one allocation.
type onePumped struct {
	g    *pumping.Guard
	d    pumping.Decision
	warn func(context.Context, error)
	part decidePart
	slot [1]*decidePart
}

// release abandons the decision's call: what takes back what it counted,
// or nil (it did not run, or counted nothing).
func (o *onePumped) release(ctx context.Context, decides []*decidePart) func() {
	if len(decides) == 0 || decides[0].reply == nil {
		return nil // the caller abandons what it decided
	}
	res, err := o.d.Read(ctx, decides[0].reply)
	if err != nil || res.Refused != nil {
		return nil
	}
	return func() {
		if err := o.g.Release(context.WithoutCancel(ctx), res); err != nil && o.warn != nil {
			o.warn(ctx, err)
		}
	}
}
