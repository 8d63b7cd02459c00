package otp

import (
	"fmt"
	"slices"
	"strings"
)

// PhoneTypes are the number types a policy may name: phonenumbers' types in
// snake case.
var PhoneTypes = []string{"fixed_line", "mobile", "fixed_line_or_mobile", "toll_free", "premium_rate",
	"shared_cost", "voip", "personal_number", "pager", "uan", "voicemail", "unknown"}

// International is how a policy names the numbers of international networks
// (+800, +808, +870, +878, +881, +882, +883, +888, +979): phonenumbers'
// region "001". Satellite and global-network numbers are a favourite of SMS
// pumping, so the shipped configuration denies them.
const International = "001"

// PhonePolicy says which numbers may get a text at all. It is checked before
// any limit, so a refused number consumes nothing.
type PhonePolicy struct {
	AllowedTypes     []string // empty: every type
	AllowedCountries []string // ISO 3166-1 alpha-2; empty: every country
	DeniedCountries  []string
}

// Validate checks the policy the way configuration needs it.
func (p PhonePolicy) Validate() error {
	for i, t := range p.AllowedTypes {
		if !slices.Contains(PhoneTypes, t) {
			return fmt.Errorf("phone.allowed_types[%d]: %q is not one of %s", i, t, strings.Join(PhoneTypes, ", "))
		}
	}
	for key, list := range map[string][]string{"phone.allowed_countries": p.AllowedCountries, "phone.denied_countries": p.DeniedCountries} {
		for i, c := range list {
			if c != International && (len(c) != 2 || strings.ToUpper(c) != c) {
				return fmt.Errorf("%s[%d]: %q is not an upper-case ISO 3166-1 alpha-2 code or %q (international networks)", key, i, c, International)
			}
		}
	}
	return nil
}

// Refusal says why the policy refuses a number ("type:premium_rate",
// "country:XK"), or "" when it allows it.
func (p PhonePolicy) Refusal(phone Phone) string {
	if len(p.AllowedTypes) > 0 && !slices.Contains(p.AllowedTypes, phone.Type) {
		return "type:" + phone.Type
	}
	if len(p.AllowedCountries) == 0 && len(p.DeniedCountries) == 0 {
		return ""
	}
	country := phone.Country()
	if slices.Contains(p.DeniedCountries, country) || (len(p.AllowedCountries) > 0 && !slices.Contains(p.AllowedCountries, country)) {
		return "country:" + country
	}
	return ""
}
