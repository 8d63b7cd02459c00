package otp

import (
	"net/netip"
	"sync"
	"time"
)

// AuthFailures slows down guessing of the admin token: after Max failed
// attempts from one client address within Window, that address is refused
// until its oldest failure leaves the window. The admin API and the console
// share one, so an attacker cannot alternate between them. It is per
// replica (in memory): a token of 24+ random bytes is out of reach of a few
// attempts a minute, even times the number of replicas.
type AuthFailures struct {
	Max    int
	Window time.Duration
	// V6Prefix groups IPv6 clients by network, as limits do.
	V6Prefix int
	// Now is the clock (time.Now; tests set their own).
	Now func() time.Time

	mu      sync.Mutex
	byIP    map[string][]time.Time
	lastGC  time.Time
	maxKeys int
}

// NewAuthFailures returns a throttle of max failures per window per address.
func NewAuthFailures(max int, window time.Duration, v6Prefix int) *AuthFailures {
	return &AuthFailures{Max: max, Window: window, V6Prefix: v6Prefix, Now: time.Now,
		byIP: make(map[string][]time.Time), maxKeys: 100000}
}

// Blocked says whether addr must wait before trying again, and how long.
func (a *AuthFailures) Blocked(addr netip.Addr) (time.Duration, bool) {
	if a == nil {
		return 0, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.Now()
	key := IPKey(addr, a.V6Prefix)
	times := a.trim(key, now)
	if len(times) < a.Max {
		return 0, false
	}
	return times[len(times)-a.Max].Add(a.Window).Sub(now), true
}

// Failed counts a failed attempt from addr.
func (a *AuthFailures) Failed(addr netip.Addr) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.Now()
	if now.Sub(a.lastGC) > a.Window {
		a.gc(now)
	}
	key := IPKey(addr, a.V6Prefix)
	times := a.trim(key, now)
	if len(times) == 0 && len(a.byIP) >= a.maxKeys {
		return // a flood of fresh addresses cannot grow the map without bound
	}
	a.byIP[key] = append(times, now)
}

func (a *AuthFailures) trim(key string, now time.Time) []time.Time {
	times := a.byIP[key]
	i := 0
	for i < len(times) && now.Sub(times[i]) >= a.Window {
		i++
	}
	if i == len(times) {
		delete(a.byIP, key)
		return nil
	}
	times = times[i:]
	a.byIP[key] = times
	return times
}

func (a *AuthFailures) gc(now time.Time) {
	for key := range a.byIP {
		a.trim(key, now)
	}
	a.lastGC = now
}
