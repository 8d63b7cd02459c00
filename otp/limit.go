package otp

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"time"
)

// Rule is one sliding window: at most Max admitted requests in the last Window.
type Rule struct {
	Window time.Duration
	Max    int
}

// Label is the window's short name as it appears in errors, reasons and
// headers: "1m", "10m", "1h", "30s".
func (r Rule) Label() string { return WindowLabel(r.Window) }

// WindowLabel formats d in its largest whole unit.
func WindowLabel(d time.Duration) string { return string(AppendWindowLabel(nil, d)) }

// AppendWindowLabel appends WindowLabel(d) to b: headers are built on every
// request without a string per window.
func AppendWindowLabel(b []byte, d time.Duration) []byte {
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return append(strconv.AppendInt(b, int64(d/time.Hour), 10), 'h')
	case d >= time.Minute && d%time.Minute == 0:
		return append(strconv.AppendInt(b, int64(d/time.Minute), 10), 'm')
	case d%time.Second == 0:
		return append(strconv.AppendInt(b, int64(d/time.Second), 10), 's')
	default:
		return append(b, d.String()...)
	}
}

// Subject is one thing a request is counted against: a client IP, a phone.
type Subject struct {
	// Scope is what a refusal names to the client: "ip", "phone", ...
	Scope string
	// Key identifies the subject's counters in the store, e.g.
	// "phone:+14155550100". Keys of different policies must differ even when
	// their scope is the same (send and verify both count per IP).
	Key   string
	Rules []Rule
	// Name is what RateLimit-Policy calls the subject's windows
	// ("prefix7-1h"), where Scope alone would name two subjects alike;
	// empty means Scope.
	Name string
	// Country is the destination's (ISO code, "001" for international
	// networks) when the subject is keyed by the destination number: over
	// several regions its windows live in that country's home region.
	// Empty for subjects kept where the request is seen (client addresses).
	Country string
}

// Window is the state of one rule of one subject as seen by a decision.
type Window struct {
	Scope string
	// Name is the subject's Name (see Subject).
	Name string
	Rule Rule
	// Used counts the admitted requests in the window, this one included
	// when it was admitted.
	Used int
	// Reset is how long until the window next gives back quota: for a full
	// window, until this request would fit; otherwise until its oldest entry
	// leaves.
	Reset time.Duration
}

// Remaining is how many more requests this window admits right now.
func (w Window) Remaining() int { return max(w.Rule.Max-w.Used, 0) }

// Policy is the window's name in RateLimit headers, e.g. "phone-1m": unique
// among the windows of a decision.
func (w Window) Policy() string { return string(w.AppendPolicy(nil)) }

// AppendPolicy appends Policy() to b.
func (w Window) AppendPolicy(b []byte) []byte {
	if w.Name != "" {
		b = append(b, w.Name...)
	} else {
		b = append(b, w.Scope...)
	}
	return AppendWindowLabel(append(b, '-'), w.Rule.Window)
}

// Decision is the limiter's answer for one request.
type Decision struct {
	Allowed bool
	// Now is the limiter's clock (Redis TIME) when it decided.
	Now time.Time
	// Tightest is the window that bounds the request most: the refusing
	// window with the longest wait when refused, else the window with the
	// fewest remaining requests.
	Tightest Window
	// RetryAfter is exact (before rounding): the earliest moment, from Now,
	// at which this request would be admitted. Zero when allowed.
	RetryAfter time.Duration
	// Policies lists every rule the request was checked against, for the
	// RateLimit-Policy header.
	Policies []Window
}

// RetryAfterSeconds is RetryAfter rounded up to whole seconds, as the API
// reports it.
func (d Decision) RetryAfterSeconds() int64 {
	return int64((d.RetryAfter + time.Second - 1) / time.Second)
}

// Reason names the refusing window, e.g. "phone:1m", as the audit log stores it.
func (d Decision) Reason() string {
	if d.Allowed {
		return ""
	}
	if d.Tightest.Scope == KeyScope {
		return KeyScope + ":" + d.Tightest.Name + ":" + d.Tightest.Rule.Label()
	}
	return d.Tightest.Scope + ":" + d.Tightest.Rule.Label()
}

// Limiter decides requests against sliding windows. Allow checks every window
// of every subject and records the request under ticket in all of them, or in
// none when any window is full: a refused request consumes nothing. Refund
// takes an admitted request back from every subject it was recorded in.
// Status reads every window of the subjects without changing them, and Reset
// forgets the subjects' admitted requests (the support desk's tools).
type Limiter interface {
	Allow(ctx context.Context, ticket string, subjects []Subject) (Decision, error)
	Refund(ctx context.Context, ticket string, subjects []Subject) error
	Status(ctx context.Context, subjects []Subject) ([]Window, error)
	Reset(ctx context.Context, subjects []Subject) error
}

// RefusalMemory is a SendAdmitter whose windows remember the refusals they
// decided until they lapse: Remembered answers one from memory, as its next
// Admit would. A send asks it before it makes a code, so a flood on a held
// subject costs no random code, seal or MAC.
type RefusalMemory interface {
	Remembered(subjects []Subject) (Decision, bool)
}

// IPKey groups client addresses the way limits count them: IPv4 (and
// IPv4-mapped IPv6) per address, IPv6 per network of v6Prefix bits, because
// one IPv6 customer usually holds a whole /64.
func IPKey(addr netip.Addr, v6Prefix int) string {
	addr = addr.Unmap()
	if addr.Is4() || v6Prefix >= 128 {
		return addr.WithZone("").String()
	}
	p, err := addr.WithZone("").Prefix(v6Prefix)
	if err != nil {
		return addr.WithZone("").String()
	}
	return p.String()
}

// RuleError is a window ValidateRules refuses: its index and field apart
// from the message, so that configuration can put its own key in front.
type RuleError struct {
	Index int
	Field string // "window" or "max"
	Msg   string
}

func (e *RuleError) Error() string { return fmt.Sprintf("[%d].%s: %s", e.Index, e.Field, e.Msg) }

// ValidateRules checks a list of windows the way configuration needs it.
func ValidateRules(rules []Rule) error {
	seen := make(map[time.Duration]bool, len(rules))
	for i, r := range rules {
		if r.Window < time.Second || r.Window%time.Second != 0 {
			return &RuleError{i, "window", fmt.Sprintf("must be a whole number of seconds, at least 1s (got %s)", r.Window)}
		}
		if r.Max < 1 {
			return &RuleError{i, "max", fmt.Sprintf("must be at least 1 (got %d)", r.Max)}
		}
		if seen[r.Window] {
			return &RuleError{i, "window", WindowLabel(r.Window) + " is listed twice"}
		}
		seen[r.Window] = true
	}
	return nil
}
