package otp

import (
	"net/netip"
	"testing"
	"time"
)

func TestAuthFailures(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	a := NewAuthFailures(3, time.Minute, 64)
	a.Now = func() time.Time { return now }
	ip := netip.MustParseAddr("203.0.113.7")
	steps := []struct {
		name    string
		advance time.Duration
		fail    bool
		addr    netip.Addr
		blocked bool
		wait    time.Duration
	}{
		{"fresh address", 0, false, ip, false, 0},
		{"first failure", 0, true, ip, false, 0},
		{"second failure", 10 * time.Second, true, ip, false, 0},
		{"third failure blocks", 10 * time.Second, true, ip, true, 40 * time.Second},
		{"another address is free", 0, false, netip.MustParseAddr("203.0.113.8"), false, 0},
		{"still blocked", 39 * time.Second, false, ip, true, time.Second},
		{"first failure left the window", time.Second, false, ip, false, 0},
		{"same /64 shares the count", 0, true, netip.MustParseAddr("2001:db8::1"), false, 0},
		{"same /64, second", 0, true, netip.MustParseAddr("2001:db8::2"), false, 0},
		{"same /64, third blocks", 0, true, netip.MustParseAddr("2001:db8::3"), true, time.Minute},
		{"IPv4-mapped counts as IPv4", 0, false, netip.MustParseAddr("::ffff:203.0.113.7"), false, 0},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			now = now.Add(s.advance)
			if s.fail {
				a.Failed(s.addr)
			}
			wait, blocked := a.Blocked(s.addr)
			if blocked != s.blocked || wait != s.wait {
				t.Fatalf("Blocked = %v, %v; want %v, %v", wait, blocked, s.wait, s.blocked)
			}
		})
	}
	var none *AuthFailures
	none.Failed(ip)
	if _, blocked := none.Blocked(ip); blocked {
		t.Fatal("a nil throttle blocks")
	}
}
