// Package sendscript implements otp.SendAdmitter on one Redis primary (with
// or without Sentinel): it runs the scripts of a send's parts (claim.lua,
// allow.lua, decide.lua, issue.lua, and settle.lua to give the windows
// back) inside one script, so everything a send needs before its text is one
// EVALSHA: one round trip, atomic, instead of four.
//
// Each part keeps its own script, protocol and Go side (the packages
// codestore, ratelimit and pumping build its keys and arguments and read its
// reply); this package only lays the calls out and composes the sources,
// once at start, so a change to a part's script flows in. On Redis Cluster
// a send's keys span slots: ClusterAdmitter runs the composed script once
// per slot, every slot at once (cluster.go).
package sendscript

import (
	"fmt"
	"strings"

	"smsgw/codestore"
	"smsgw/pumping"
	"smsgw/ratelimit"
)

// The parts, in the order the composed script runs them, and their place
// in its header and reply.
const (
	partClaim   = iota // claim.lua: the idempotency scope
	partAllow          // allow.lua: every window of every subject
	partRelease        // settle.lua, release: gives the windows back
	partDecide         // decide.lua: the pumping rules
	partIssue          // issue.lua: the code
	partCount
)

// replyLen is the composed reply's length: one entry per part that answers.
const replyLen = 4

// Positions in the composed reply (0-based).
const (
	replyClaim  = 0 // claim.lua's reply, or 0 when not run
	replyAllow  = 1 // allow.lua's
	replyDecide = 2 // decide.lua's
	replyIssue  = 3 // {issue.lua's reply} (a list: its false reads as nil)
)

// composedReply is the composed script's reply, read in this one place:
// each part's own reply, for its package's reader (0: the part did not
// run; the issue part's is a list of one).
type composedReply struct{ claim, allow, decide, issue any }

// parseComposed reads the composed script's reply.
func parseComposed(v any) (composedReply, error) {
	r, ok := v.([]any)
	if !ok || len(r) != replyLen {
		return composedReply{}, fmt.Errorf("unexpected reply %v", v)
	}
	return composedReply{claim: r[replyClaim], allow: r[replyAllow], decide: r[replyDecide], issue: r[replyIssue]}, nil
}

// orchestrator runs the parts. ARGV[1..2*partCount] are each part's number
// of keys and of arguments (0 0: the part is not asked), ARGV[2*partCount+1]
// is "1" for a Cluster slot's call (argPerSlot); the parts' KEYS and ARGV
// follow in part order. It stops at the first refusal, and a pumping
// refusal gives back the windows counted a moment before, in the same
// atomic step, so a refused send holds nothing.
//
// A Cluster slot's call gives nothing back itself (the Go side releases
// across slots), and a restricted country asking again for the caller's
// signal (decide.lua's verdict 3) does not stop the slot's other parts.
const orchestrator = `
local calls = {}
local kp, ap = 0, 2 * 5 + 1
local perSlot = ARGV[2 * 5 + 1] == '1'
for i = 1, 5 do
  local nk, na = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  if nk + na > 0 then
    local k, a = {}, {}
    for j = 1, nk do k[j] = KEYS[kp + j] end
    for j = 1, na do a[j] = ARGV[ap + j] end
    calls[i] = {k, a}
  end
  kp, ap = kp + nk, ap + na
end
local out = {0, 0, 0, 0}
local c = calls[1]
if c then
  out[1] = claim(c[1], c[2])
  if out[1][1] ~= 1 then return out end
end
c = calls[2]
if c then
  out[2] = allow(c[1], c[2])
  if out[2][1] ~= 1 then return out end
end
c = calls[4]
if c then
  out[3] = decide(c[1], c[2])
  if out[3][1] == 0 or (out[3][1] == 3 and not perSlot) then
    if calls[3] then release(calls[3][1], calls[3][2]) end
    return out
  end
end
c = calls[5]
if c then out[4] = {issue(c[1], c[2])} end
return out
`

// compose wraps each part's script as a local function of (KEYS, ARGV) and
// appends the orchestrator.
func compose() string {
	var b strings.Builder
	for _, p := range []struct{ name, src string }{
		{"claim", codestore.ClaimLua()},
		{"allow", ratelimit.AllowLua()},
		{"release", ratelimit.SettleLua()},
		{"decide", pumping.DecideLua()},
		{"issue", codestore.IssueLua()},
	} {
		b.WriteString("local function " + p.name + "(KEYS, ARGV)\n")
		b.WriteString(p.src)
		b.WriteString("\nend\n")
	}
	b.WriteString(orchestrator)
	return b.String()
}

// layout lays the parts' calls out as the orchestrator reads them;
// perSlot marks a Cluster slot's call.
func layout(parts *[partCount]call, perSlot bool) (keys []string, args []any) {
	n, m := 0, 2*partCount+1
	for _, p := range parts {
		n, m = n+len(p.keys), m+len(p.args)
	}
	keys, args = make([]string, 0, n), make([]any, 0, m)
	for _, p := range parts {
		args = append(args, len(p.keys), len(p.args))
	}
	args = append(args, argPerSlot[perSlot])
	for _, p := range parts {
		keys = append(keys, p.keys...)
		args = append(args, p.args...)
	}
	return keys, args
}

// argPerSlot is the orchestrator's ARGV[2*partCount+1].
var argPerSlot = map[bool]string{false: "0", true: "1"}

// call is one part's script call.
type call struct {
	keys []string
	args []any
}

func (c call) asked() bool { return len(c.keys)+len(c.args) > 0 }
