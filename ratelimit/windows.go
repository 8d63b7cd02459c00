package ratelimit

import (
	"errors"
	"time"

	"smsgw/internal/luascript"
	"smsgw/otp"
)

// Windows is one decision of every window of a send's subjects, prepared
// for a script that runs allow.lua inside its own: the call that decides
// and records the ticket for good, and the settle.lua call that takes it
// back in the same script. It reuses allow.lua's and settle.lua's
// protocol, so Refund takes back what it counted.
type Windows struct {
	l        *Limiter
	subjects []otp.Subject
	start    time.Time
	decided  *otp.Decision
	// Keys and Args are allow.lua's call; UndoKeys and UndoArgs settle.lua's
	// release of it.
	Keys, UndoKeys []string
	Args, UndoArgs []any
}

// AllowLua and SettleLua are allow.lua and settle.lua, for a script that
// runs them inside its own with a send's other parts (package admission).
func AllowLua() string  { return luascript.Source(luaFiles, "allow.lua") }
func SettleLua() string { return luascript.Source(luaFiles, "settle.lua") }

// AllowStops is, as a Lua expression over allow.lua's reply r, whether it
// ends a composed send: a window refused (an admission with every window
// empty answers a number).
const AllowStops = "type(r) == 'table' and r[1] ~= 1"

var errSeveralSlots = errors.New("ratelimit: the subjects are on several Cluster slots: not one call")

// Windows prepares the decision of ticket over subjects as one call. It
// fails when the subjects need several (Redis Cluster).
func (l *Limiter) Windows(ticket string, subjects []otp.Subject) (Windows, error) {
	return l.windows(ticket, subjects, true)
}

// WindowsAsked is Windows that asks Redis even when this replica remembers
// a refusal: a send asking again once the counts that refused it are given
// back (admission.ClusterAdmitter, after a keyed send's duplicates).
func (l *Limiter) WindowsAsked(ticket string, subjects []otp.Subject) (Windows, error) {
	return l.windows(ticket, subjects, false)
}

func (l *Limiter) windows(ticket string, subjects []otp.Subject, remember bool) (Windows, error) {
	w := Windows{l: l, subjects: subjects, start: time.Now()}
	if len(subjects) == 0 {
		w.decided = &otp.Decision{Allowed: true}
		return w, nil
	}
	keys := l.subjectKeys(subjects)
	if remember {
		if d, ok := l.remembered(subjects, keys, w.start); ok {
			w.decided = &d
			return w, nil
		}
	}
	if len(l.slots(subjects)) > 1 {
		return Windows{}, errSeveralSlots
	}
	w.Keys, w.Args = keys, l.allowArgs(ticket, 0, subjects).argv()
	w.UndoKeys, w.UndoArgs = withPending(keys), settleArgs{ticket, settleRelease}.argv()
	return w, nil
}

// Decided is the decision when no call is needed: no subject, or a refusal
// this replica remembers.
func (w Windows) Decided() (otp.Decision, bool) {
	if w.decided == nil {
		return otp.Decision{}, false
	}
	return *w.decided, true
}

// Read reads allow.lua's reply, as Allow would.
func (w Windows) Read(v any) (otp.Decision, error) {
	r, err := w.l.readAllow(v, w.subjects)
	if err != nil {
		return otp.Decision{}, err
	}
	d := r.decision()
	w.l.noteRefusal(d, r, w.start)
	return d, nil
}
