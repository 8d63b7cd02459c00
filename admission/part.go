// Package admission implements otp.SendAdmitter on one Redis primary (with
// or without Sentinel): it runs the scripts of a send's parts (claim.lua,
// allow.lua, decide.lua, issue.lua, and settle.lua to give the windows
// back) inside one script, so everything a send needs before its text is one
// EVALSHA: one round trip, atomic, instead of four.
//
// Each part keeps its own script, protocol and Go side (the packages
// codestore, ratelimit and pumping build its keys and arguments, say when
// its reply stops the script and read it). The composer (this file) knows a
// part only as a Part: it lays the parts' calls out, composes their sources
// once at start, so a change to a part's script flows in, and hands each
// part its own reply. On Redis Cluster a send's keys span slots:
// ClusterAdmitter runs the composed script once per slot, every slot at
// once (cluster.go).
package admission

import (
	"fmt"
	"strconv"
	"strings"
)

// Part is one part of a send on one hash tag, as the composed script runs
// it: which script, its keys (all on one tag) and arguments, and the reader
// of its reply. The parts (parts.go) wrap what their packages expose.
type Part interface {
	Script() *Script
	Keys() []string
	Args() []any
	// Read reads the part's reply; it is called only when the part ran.
	Read(reply any) error
}

// Undoer is a Part that a later part's stop takes back in the same atomic
// step (the windows: settle.lua's release): Undo is that call, run with its
// Script's Undo.
type Undoer interface {
	Undo() (keys []string, args []any)
}

// Script is a part's Lua as the composed script runs it.
type Script struct {
	// Name is the Lua function the part's source becomes: a function of
	// (KEYS, ARGV), as when the script runs alone.
	Name   string
	Source func() string
	// Stops is a Lua expression over the part's reply r and tagged (the
	// call is one Cluster slot's): true ends the composed script after the
	// part. Empty: the part never stops it.
	Stops string
	// Undo is the script that takes the part back when a later part stops
	// the composed script (the part is then an Undoer). An undo runs only
	// then, never in order.
	Undo *Script
	at   int // its place in scripts
}

// scripts are the composed script's parts in the order it runs them; each
// Script is declared with its part (parts.go).
var scripts = [nScripts]*Script{claimScript, allowScript, releaseScript, decideScript, issueScript}

const nScripts = 5

// composed is the composed script's source, made once (compose places
// each script).
var composed = compose(scripts[:])

// slots holds a composed call's parts, by their script's place; an
// Undoer's undo sits in its Undo script's place.
type slots [nScripts]Part

// undoCall is an Undoer's undo as a Part of its own: the composer lays it
// out like any other and never reads it.
type undoCall struct {
	script *Script
	keys   []string
	args   []any
}

func (u undoCall) Script() *Script { return u.script }
func (u undoCall) Keys() []string  { return u.keys }
func (u undoCall) Args() []any     { return u.args }
func (u undoCall) Read(any) error  { return nil }

// put places p (and its undo) in s.
func (s *slots) put(p Part) {
	sc := p.Script()
	s[sc.at] = p
	if u, ok := p.(Undoer); ok && sc.Undo != nil {
		keys, args := u.Undo()
		s[sc.Undo.at] = undoCall{script: sc.Undo, keys: keys, args: args}
	}
}

// free says whether s has no part of script sc yet.
func (s *slots) free(sc *Script) bool { return s[sc.at] == nil }

// compose wraps each part's script as a local function of (KEYS, ARGV),
// then runs them in order. ARGV[1..2n] are each part's number of keys and
// of arguments (0 0: not asked), ARGV[2n+1] is "1" for a Cluster slot's
// call; the parts' KEYS and ARGV follow in order. Each asked part's reply
// is in the composed reply at its place, as a list of one (0: it did not
// run); a part that stops the script first runs the undo of each earlier
// part that has one, so a refused send holds nothing.
func compose(scripts []*Script) string {
	var b strings.Builder
	n := strconv.Itoa(len(scripts))
	for i, s := range scripts {
		s.at = i
		b.WriteString("local function " + s.Name + "(KEYS, ARGV)\n" + s.Source() + "\nend\n")
	}
	b.WriteString(`local calls = {}
local kp, ap = 0, 2 * ` + n + ` + 1
local tagged = ARGV[2 * ` + n + ` + 1] == '1'
for i = 1, ` + n + ` do
  local nk, na = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  if nk + na > 0 then
    local k, a = {}, {}
    for j = 1, nk do k[j] = KEYS[kp + j] end
    for j = 1, na do a[j] = ARGV[ap + j] end
    calls[i] = {k, a}
  end
  kp, ap = kp + nk, ap + na
end
local out = {}
for i = 1, ` + n + ` do out[i] = 0 end
local c, r
`)
	undo := map[*Script]bool{}
	for _, s := range scripts {
		if s.Undo != nil {
			undo[s.Undo] = true
		}
	}
	for _, s := range scripts {
		if undo[s] {
			continue // runs only when a later part stops
		}
		i := strconv.Itoa(s.at + 1)
		b.WriteString("c = calls[" + i + "]\nif c then\n  r = " + s.Name + "(c[1], c[2])\n  out[" + i + "] = {r}\n")
		if s.Stops != "" {
			b.WriteString("  if " + s.Stops + " then\n")
			for _, e := range scripts[:s.at] {
				if e.Undo != nil {
					u := strconv.Itoa(e.Undo.at + 1)
					b.WriteString("    if calls[" + u + "] then " + e.Undo.Name + "(calls[" + u + "][1], calls[" + u + "][2]) end\n")
				}
			}
			b.WriteString("    return out\n  end\n")
		}
		b.WriteString("end\n")
	}
	b.WriteString("return out\n")
	return b.String()
}

// layout lays a composed call's parts (by their script's place) out as
// compose reads them; tagged marks a Cluster slot's call.
func layout(parts []Part, tagged bool) (keys []string, args []any) {
	n, m := 0, 2*len(parts)+1
	for _, p := range parts {
		if p != nil {
			n, m = n+len(p.Keys()), m+len(p.Args())
		}
	}
	keys, args = make([]string, 0, n), make([]any, 0, m)
	for _, p := range parts {
		if p == nil {
			args = append(args, 0, 0)
		} else {
			args = append(args, len(p.Keys()), len(p.Args()))
		}
	}
	args = append(args, argTagged(tagged))
	for _, p := range parts {
		if p != nil {
			keys = append(keys, p.Keys()...)
			args = append(args, p.Args()...)
		}
	}
	return keys, args
}

// argTagged is the composed script's ARGV[2n+1] (a constant in an
// interface: no allocation).
func argTagged(tagged bool) any {
	if tagged {
		return "1"
	}
	return "0"
}

// replies splits the composed reply: each part's own reply at its place,
// and whether it ran.
type replies struct {
	reply [nScripts]any
	ran   [nScripts]bool
}

// split reads the reply of a script composed of n parts.
func split(v any, n int) (replies, error) {
	var out replies
	r, ok := v.([]any)
	if !ok || len(r) != n || n > nScripts {
		return out, fmt.Errorf("unexpected reply %v", v)
	}
	for i, e := range r {
		switch e := e.(type) {
		case []any:
			if len(e) != 1 {
				return out, fmt.Errorf("unexpected reply %v", v)
			}
			out.reply[i], out.ran[i] = e[0], true
		case int64:
			if e != 0 {
				return out, fmt.Errorf("unexpected reply %v", v)
			}
		default:
			return out, fmt.Errorf("unexpected reply %v", v)
		}
	}
	return out, nil
}

// read hands each part of s that ran its own reply, and says what each
// reader answered, by place.
func (r *replies) read(s []Part) (errs [nScripts]error) {
	for i, p := range s {
		if p != nil && r.ran[i] {
			errs[i] = p.Read(r.reply[i])
		}
	}
	return errs
}
