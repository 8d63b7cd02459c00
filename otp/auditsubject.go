package otp

import (
	"net/netip"
	"strings"
)

// AuditSubject names what an answer that texted nobody is counted against in
// the audit trail (see AuditLog.Note): the refusing window's subject
// ("phone:+37120000000", "ip:203.0.113.7", "country:LV", "prefix:3712",
// "global"), the refusing pumping rule's (what it counted, e.g.
// "pumping:+3712000xxxx"), else the number, else the client's network ("ip:…",
// IPv6 by limits.ipv6_prefix), else "unknown". Bad input and unauthorized
// calls have no number and count against the client's network.
func (s *Service) AuditSubject(dec Decision, rule *PumpingRefusal, phone Phone, clientIP netip.Addr) string {
	if rule != nil && rule.Subject != "" {
		return "pumping:" + rule.Subject
	}
	if !dec.Allowed && dec.Tightest.Scope != "" {
		if dec.Tightest.Scope == "ip" {
			return s.ClientNetwork(clientIP)
		}
		for _, t := range s.subjects {
			if t.scope == dec.Tightest.Scope && t.name == dec.Tightest.Name {
				if key := t.key(phone, clientIP); key != "" {
					return strings.TrimPrefix(key, "send:")
				}
			}
		}
	}
	if phone.E164 != "" {
		return "phone:" + phone.E164
	}
	return s.ClientNetwork(clientIP)
}

// ClientNetwork is the audit subject of a client address: "ip:" and the
// address, or its IPv6 network as the limits count it; "unknown" without one.
func (s *Service) ClientNetwork(clientIP netip.Addr) string {
	if !clientIP.IsValid() {
		return "unknown"
	}
	return "ip:" + IPKey(clientIP, s.cfg.IPv6Prefix)
}
