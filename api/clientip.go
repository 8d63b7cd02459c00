package api

import (
	"net/http"
	"net/netip"
	"strings"
)

// ClientIPs finds the client address of a request. The TCP peer is the client
// unless the peer is a trusted proxy; then X-Forwarded-For is walked from the
// right (the hop the nearest proxy appended), skipping trusted hops, and the
// first untrusted address is the client. Everything left of it was written by
// someone we do not trust and is ignored.
type ClientIPs struct {
	trusted []netip.Prefix
}

// NewClientIPs returns a resolver trusting X-Forwarded-For from these networks.
func NewClientIPs(trusted []netip.Prefix) *ClientIPs {
	out := make([]netip.Prefix, len(trusted))
	for i, p := range trusted {
		out[i] = p.Masked()
	}
	return &ClientIPs{trusted: out}
}

func (r *ClientIPs) isTrusted(a netip.Addr) bool {
	for _, p := range r.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Resolve returns the client address; IPv4-mapped IPv6 is returned as IPv4.
// A trusted proxy that passes on something unparseable (nginx's "unknown")
// leaves the client unknown: the proxy's own address is used, so such clients
// share one strict budget instead of escaping the limits.
func (r *ClientIPs) Resolve(req *http.Request) netip.Addr {
	peer := peerAddr(req.RemoteAddr)
	if !peer.IsValid() || len(r.trusted) == 0 || !r.isTrusted(peer) {
		return peer
	}
	values := req.Header.Values("X-Forwarded-For")
	client := peer
	for i := len(values) - 1; i >= 0; i-- {
		hops := values[i]
		for hops != "" {
			var hop string
			if j := strings.LastIndexByte(hops, ','); j >= 0 {
				hop, hops = hops[j+1:], hops[:j]
			} else {
				hop, hops = hops, ""
			}
			hop = strings.TrimSpace(hop)
			if hop == "" {
				continue
			}
			a := parseHop(hop)
			if !a.IsValid() {
				return client
			}
			if !r.isTrusted(a) {
				return a
			}
			client = a
		}
	}
	return client
}

func peerAddr(remote string) netip.Addr {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ap.Addr().Unmap().WithZone("")
	}
	if a, err := netip.ParseAddr(remote); err == nil {
		return a.Unmap().WithZone("")
	}
	return netip.Addr{}
}

// parseHop accepts an address as proxies write it: "203.0.113.7",
// "2001:db8::1", "[2001:db8::1]:443", "203.0.113.7:5678".
func parseHop(s string) netip.Addr {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone("")
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone("")
	}
	return netip.Addr{}
}
