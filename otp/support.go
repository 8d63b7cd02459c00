package otp

import (
	"context"
	"net/netip"
	"strings"
)

// LimitWindow is one window as the support desk sees it.
type LimitWindow struct {
	Policy string // "send" or "verify"
	Window
}

// SupportView is what the support desk sees of one phone or one client IP.
type SupportView struct {
	Phone   string // E.164, when asked about a phone
	IP      string // the counted address or IPv6 network, when asked about an IP
	Key     string // the limit key's name, when asked about one of its values
	Windows []LimitWindow
	// Code is the phone's pending code; nil when none, or asked about an IP.
	Code *PendingCode
}

type policySubjects struct {
	policy   string
	subjects []Subject
}

// supportSubjects resolves exactly one of a phone or an IP to the subjects
// counted for it, by policy.
func (s *Service) supportSubjects(phoneRaw, ipRaw string) (SupportView, []policySubjects, error) {
	var v SupportView
	if (phoneRaw == "") == (ipRaw == "") {
		return v, nil, Errorf(EInvalidRequest, "give exactly one of phone and ip")
	}
	if phoneRaw != "" {
		phone, err := s.parsePhone(phoneRaw, "")
		if err != nil {
			return v, nil, err
		}
		v.Phone = phone.E164
		return v, []policySubjects{{"send", s.subjectsOf(ofPhone, phone, netip.Addr{})}}, nil
	}
	addr, err := netip.ParseAddr(strings.TrimSpace(ipRaw))
	if err != nil {
		return v, nil, Errorf(EInvalidRequest, "ip is not an IP address")
	}
	v.IP = IPKey(addr, s.cfg.IPv6Prefix)
	return v, []policySubjects{{"send", s.subjectsOf(ofClient, Phone{}, addr)}, {"verify", s.VerifySubjects(addr)}}, nil
}

// Limits shows every window counted for a phone or a client IP (exactly one
// of them), and a phone's pending code.
func (s *Service) Limits(ctx context.Context, phoneRaw, ipRaw string) (SupportView, error) {
	v, groups, err := s.supportSubjects(phoneRaw, ipRaw)
	if err != nil {
		return v, err
	}
	for _, g := range groups {
		windows, err := s.Limiter.Status(ctx, g.subjects)
		if err != nil {
			return v, unavailable("limiter", err)
		}
		for _, w := range windows {
			v.Windows = append(v.Windows, LimitWindow{Policy: g.policy, Window: w})
		}
	}
	if v.Phone != "" {
		pending, ok, err := s.Codes.Pending(ctx, v.Phone)
		if err != nil {
			return v, unavailable("codes", err)
		}
		if ok {
			v.Code = &pending
		}
	}
	return v, nil
}

// ResetLimits forgets every admitted request counted for a phone or a client
// IP and returns what is left (nothing). A pending code is left alone.
func (s *Service) ResetLimits(ctx context.Context, phoneRaw, ipRaw string) (SupportView, error) {
	_, groups, err := s.supportSubjects(phoneRaw, ipRaw)
	if err != nil {
		return SupportView{}, err
	}
	for _, g := range groups {
		if err := s.Limiter.Reset(ctx, g.subjects); err != nil {
			return SupportView{}, unavailable("limiter", err)
		}
	}
	return s.Limits(ctx, phoneRaw, ipRaw)
}
