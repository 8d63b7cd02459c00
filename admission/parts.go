package admission

// The parts of a send, each a Part over what its package exposes: its
// script, when its reply stops the composed script, its call and its
// reply reader. Whatever a reply means is read by the part's package.

import (
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

// decidePart is one decide.lua call (pumping.Decision, or one of
// pumping.TagDecisions' calls). Its reply is kept for the pumping side's
// reader, which concludes over every call of the send at once.
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
