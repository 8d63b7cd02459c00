package api

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

func TestClientIPs(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	tests := []struct {
		name    string
		trusted []netip.Prefix
		remote  string
		xff     []string
		want    string
	}{
		{"no proxies: the peer", nil, "203.0.113.7:5555", []string{"1.2.3.4"}, "203.0.113.7"},
		{"untrusted peer's header is ignored", trusted, "203.0.113.7:5555", []string{"1.2.3.4"}, "203.0.113.7"},
		{"trusted peer, one hop", trusted, "10.0.0.2:80", []string{"198.51.100.4"}, "198.51.100.4"},
		{"spoofed left part is ignored", trusted, "10.0.0.2:80", []string{"6.6.6.6, 198.51.100.4"}, "198.51.100.4"},
		{"trusted hops are skipped", trusted, "10.0.0.2:80", []string{"6.6.6.6, 198.51.100.4, 10.1.1.1, 10.2.2.2"}, "198.51.100.4"},
		{"several headers read as one list", trusted, "10.0.0.2:80", []string{"6.6.6.6", "198.51.100.4, 10.1.1.1"}, "198.51.100.4"},
		{"all hops trusted: the left-most", trusted, "10.0.0.2:80", []string{"10.3.3.3, 10.1.1.1"}, "10.3.3.3"},
		{"no header: the proxy", trusted, "10.0.0.2:80", nil, "10.0.0.2"},
		{"garbage hop: the proxy that wrote it", trusted, "10.0.0.2:80", []string{"198.51.100.4, unknown"}, "10.0.0.2"},
		{"garbage behind a trusted hop", trusted, "10.0.0.2:80", []string{"nonsense, 10.1.1.1"}, "10.1.1.1"},
		{"hop with port", trusted, "10.0.0.2:80", []string{"198.51.100.4:4711"}, "198.51.100.4"},
		{"bracketed IPv6 hop with port", trusted, "10.0.0.2:80", []string{"[2001:db8::5]:443"}, "2001:db8::5"},
		{"IPv4-mapped hop", trusted, "10.0.0.2:80", []string{"::ffff:198.51.100.4"}, "198.51.100.4"},
		{"IPv4-mapped peer", nil, "[::ffff:203.0.113.7]:5555", nil, "203.0.113.7"},
		{"IPv6 peer", nil, "[2001:db8::1]:5555", nil, "2001:db8::1"},
		{"trusted IPv6 proxy", trusted, "[fd00::1]:80", []string{"2001:db8::9"}, "2001:db8::9"},
		{"empty elements", trusted, "10.0.0.2:80", []string{" , ,198.51.100.4 , "}, "198.51.100.4"},
		{"zone is dropped", trusted, "10.0.0.2:80", []string{"fe80::1%eth0"}, "fe80::1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &http.Request{RemoteAddr: tt.remote, Header: http.Header{}}
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := NewClientIPs(tt.trusted).Resolve(r); got.String() != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// FuzzClientIP: whatever a client puts in X-Forwarded-For, the answer is a
// valid, normalized address: the trusted peer or one of the header's hops.
func FuzzClientIP(f *testing.F) {
	for _, s := range []string{"198.51.100.4", "6.6.6.6, 198.51.100.4, 10.1.1.1", "unknown", "[2001:db8::5]:443", ",,,", "::ffff:1.2.3.4", "1.2.3.4%eth0"} {
		f.Add(s)
	}
	r := NewClientIPs([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")})
	f.Fuzz(func(t *testing.T, xff string) {
		req := &http.Request{RemoteAddr: "10.0.0.2:80", Header: http.Header{"X-Forwarded-For": {xff}}}
		got := r.Resolve(req)
		if !got.IsValid() {
			t.Fatalf("invalid address for %q", xff)
		}
		if got.Is4In6() || got.Zone() != "" {
			t.Fatalf("address %s not normalized", got)
		}
		if got == netip.MustParseAddr("10.0.0.2") {
			return
		}
		for _, hop := range strings.Split(xff, ",") {
			if parseHop(strings.TrimSpace(hop)) == got {
				return
			}
		}
		t.Fatalf("address %s is neither the peer nor a hop of %q", got, xff)
	})
}
