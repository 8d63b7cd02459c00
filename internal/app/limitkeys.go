package app

import (
	"fmt"
	"slices"

	"smsgw/otp"
)

// keyRules gathers [[limits.key]] by name, in the order names first appear:
// several entries with one name are that key's windows.
func keyRules(in []KeyLimit) ([]otp.KeyRules, error) {
	var out []otp.KeyRules
	for i, k := range in {
		if err := otp.ValidKeyName(k.Name); err != nil {
			return nil, fmt.Errorf("limits.key[%d].name: %w", i, err)
		}
		j := slices.IndexFunc(out, func(r otp.KeyRules) bool { return r.Name == k.Name })
		if j < 0 {
			j = len(out)
			out = append(out, otp.KeyRules{Name: k.Name})
		}
		out[j].Rules = append(out[j].Rules, otp.Rule{Window: k.Window.Duration, Max: k.Max})
		if err := otp.ValidateRules(out[j].Rules); err != nil {
			return nil, fmt.Errorf("limits.key[%d] (%s): %w", i, k.Name, err)
		}
	}
	return out, nil
}
