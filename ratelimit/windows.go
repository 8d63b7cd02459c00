package ratelimit

import (
	"errors"
	"time"
	"unsafe"

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
	undoKeys := l.keysWithPending(subjects)
	keys := undoKeys[:len(subjects):len(subjects)]
	if remember {
		if d, ok := l.remembered(subjects, keys, w.start); ok {
			w.decided = &d
			return w, nil
		}
	}
	if l.cluster && len(subjects) > 1 && len(l.slots(subjects)) > 1 {
		return Windows{}, errSeveralSlots
	}
	w.Keys, w.Args = keys, l.allowArgs(ticket, 0, subjects).argv()
	// The ticket as allow's ARGV holds it, already in an interface.
	w.UndoKeys, w.UndoArgs = undoKeys, []any{w.Args[allowArgTicket-1], string(settleRelease)}
	return w, nil
}

// keysWithPending is withPending(l.subjectKeys(subjects)), its strings
// pieces of one: a subject's key is its pending set's without the
// suffix.
func (l *Limiter) keysWithPending(subjects []otp.Subject) []string {
	n := 0
	for _, s := range subjects {
		n += len(l.prefix) + len("rl:{}") + len(s.Key) + len(pendingSuffix)
	}
	b := make([]byte, 0, n)
	for _, s := range subjects {
		b = append(b, l.prefix...)
		b = append(b, "rl:{"...)
		b = append(b, s.Key...)
		b = append(b, '}')
		b = append(b, pendingSuffix...)
	}
	all := unsafe.String(unsafe.SliceData(b), len(b))
	out := make([]string, 2*len(subjects))
	at := 0
	for i, s := range subjects {
		end := at + len(l.prefix) + len("rl:{}") + len(s.Key) + len(pendingSuffix)
		out[i], out[len(subjects)+i] = all[at:end-len(pendingSuffix)], all[at:end]
		at = end
	}
	return out
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
