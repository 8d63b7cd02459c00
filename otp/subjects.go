package otp

import (
	"net/netip"
	"strconv"
)

// SendPhoneKey starts the key of a send's per-phone subject; the number
// follows.
const SendPhoneKey = "send:phone:"

// sendSubject is one kind of thing a send is counted against. The table of
// them (sendSubjects) is the one place a new kind is added.
type sendSubject struct {
	scope string
	// name tells subjects of one scope apart in RateLimit-Policy; "" when
	// the scope has one subject.
	name string
	// of says whose identity the key is made of, which decides where the
	// support desk sees the subject.
	of subjectOwner
	// homed: keyed by the destination, so kept in the number's home region.
	homed bool
	rules []Rule
	// key names the subject's counters for a request; "" when the request
	// has nothing to count (no client address).
	key func(phone Phone, clientIP netip.Addr) string
}

type subjectOwner int

const (
	ofPhone  subjectOwner = iota + 1 // the number itself
	ofClient                         // the client's address
	ofShared                         // many numbers at once: a country, a range, everything
)

// sendSubjects is the table of subjects a send is counted against, tightest
// first. Kinds without rules are left out.
func sendSubjects(cfg Config) []sendSubject {
	table := []sendSubject{
		{scope: "phone", of: ofPhone, homed: true, rules: cfg.PhoneRules, key: func(p Phone, _ netip.Addr) string {
			return SendPhoneKey + p.E164
		}},
		{scope: "ip", of: ofClient, rules: cfg.IPRules, key: func(_ Phone, ip netip.Addr) string {
			if !ip.IsValid() {
				return ""
			}
			return "send:ip:" + IPKey(ip, cfg.IPv6Prefix)
		}},
		{scope: "country", of: ofShared, homed: true, rules: cfg.CountryRules, key: func(p Phone, _ netip.Addr) string {
			return "send:country:" + p.Country()
		}},
	}
	for _, pr := range cfg.PrefixRules {
		n := pr.Digits
		table = append(table, sendSubject{scope: "prefix", name: "prefix" + strconv.Itoa(n), of: ofShared, homed: true, rules: pr.Rules, key: func(p Phone, _ netip.Addr) string {
			digits := p.E164[1:]
			if len(digits) > n {
				digits = digits[:n]
			}
			return "send:prefix:" + digits
		}})
	}
	table = append(table, sendSubject{scope: "global", of: ofShared, rules: cfg.GlobalRules, key: func(Phone, netip.Addr) string {
		return "send:global"
	}})
	kept := table[:0]
	for _, t := range table {
		if len(t.rules) > 0 {
			kept = append(kept, t)
		}
	}
	return kept
}

// SendSubjects lists what a send is counted against, tightest first: the
// phone, the client IP, and, when configured, the destination country, its
// number range and everything.
func (s *Service) SendSubjects(phone Phone, clientIP netip.Addr) []Subject {
	return s.subjectsOf(0, phone, clientIP)
}

// subjectsOf lists the send subjects owned by of (all when of is 0).
func (s *Service) subjectsOf(of subjectOwner, phone Phone, clientIP netip.Addr) []Subject {
	subjects := make([]Subject, 0, len(s.subjects))
	for _, t := range s.subjects {
		if of != 0 && t.of != of {
			continue
		}
		if key := t.key(phone, clientIP); key != "" {
			sub := Subject{Scope: t.scope, Key: key, Rules: t.rules, Name: t.name}
			if t.homed {
				sub.Country = phone.Country()
			}
			subjects = append(subjects, sub)
		}
	}
	return subjects
}

// VerifySubjects lists what a verify is counted against: the client IP, under
// its own budget apart from sends.
func (s *Service) VerifySubjects(clientIP netip.Addr) []Subject {
	if !clientIP.IsValid() || len(s.cfg.VerifyIPRules) == 0 {
		return nil
	}
	return []Subject{{Scope: "ip", Key: "verify:ip:" + IPKey(clientIP, s.cfg.IPv6Prefix), Rules: s.cfg.VerifyIPRules}}
}
