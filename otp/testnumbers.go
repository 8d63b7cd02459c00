package otp

import (
	"crypto/subtle"
	"fmt"
	"strings"
	"time"
)

// TestNumber is a number frontends' automated tests use: never texted,
// counted against nothing, its code fixed.
type TestNumber struct {
	Phone string // E.164
	Code  string
	// Region, when set, is the ISO code the number must belong to
	// (+44 7911 is Guernsey, not GB): a check on what the author meant.
	Region string
}

// ValidateTestNumbers checks [[test_numbers]]: each a valid number in the
// region it claims, written in E.164, with a code of codeLength digits.
func ValidateTestNumbers(list []TestNumber, codeLength int) error {
	seen := map[string]bool{}
	for i, tn := range list {
		p, err := ParsePhone(tn.Phone, "")
		if err != nil || p.E164 != tn.Phone {
			return fmt.Errorf("test_numbers[%d].phone: %q is not a valid number in E.164 notation", i, tn.Phone)
		}
		if tn.Region != "" && p.Country() != tn.Region {
			return fmt.Errorf("test_numbers[%d].phone: %s is a number of %s, not of region %q", i, p.E164, p.Country(), tn.Region)
		}
		if seen[p.E164] {
			return fmt.Errorf("test_numbers[%d].phone: %s is listed twice", i, p.E164)
		}
		seen[p.E164] = true
		if len(tn.Code) != codeLength || strings.Trim(tn.Code, "0123456789") != "" {
			return fmt.Errorf("test_numbers[%d].code: want %d digits (otp.length)", i, codeLength)
		}
	}
	return nil
}

func (s *Service) isTestNumber(p Phone) bool {
	_, ok := s.testCodes[p.E164]
	return ok
}

// verifyTestNumber approves the fixed code; a wrong one is refused without
// counting an attempt, since nothing is pending.
func (s *Service) verifyTestNumber(p Phone, code string) error {
	if subtle.ConstantTimeCompare([]byte(code), []byte(s.testCodes[p.E164])) == 1 {
		return nil
	}
	return invalidCode(s.cfg.MaxAttempts)
}

// untouched is the decision a test number gets: every window it would be
// counted against, none used, so its answer carries the same limit headers
// as any other 202.
func untouched(now time.Time, subjects []Subject) Decision {
	d := Decision{Allowed: true, Now: now}
	for _, s := range subjects {
		for _, r := range s.Rules {
			w := Window{Scope: s.Scope, Name: s.Name, Rule: r, Reset: r.Window}
			d.Policies = append(d.Policies, w)
			t := d.Tightest
			if len(d.Policies) == 1 || r.Max < t.Rule.Max || (r.Max == t.Rule.Max && r.Window > t.Rule.Window) {
				d.Tightest = w
			}
		}
	}
	return d
}
