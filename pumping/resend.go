package pumping

import (
	"context"

	"smsgw/otp"
)

// giveBackFreeResend takes back what the caller's networks counted for a
// free resend (a number counted before, within its two free resends: its
// destination call answered recorded 0) when they were asked apart from
// the number's record, as on Redis Cluster: decide.lua skips them itself
// when one call holds both. It returns the calls the reservation still
// holds.
func (g *Guard) giveBackFreeResend(ctx context.Context, phone otp.Phone, counted []call) []call {
	free := false
	for _, c := range counted {
		if c.grp.record != "" && c.recorded == 0 {
			free = true
		}
	}
	if !free {
		return counted
	}
	var kept, back []call
	for _, c := range counted {
		if c.grp.record == "" && c.grp.networks() {
			c.recorded = freeResendNetworks
			back = append(back, c)
		} else {
			kept = append(kept, c)
		}
	}
	g.releaseCounted(ctx, phone, back, nil, "giving a free resend back to the caller's networks failed")
	return kept
}

// freeResendNetworks is release.lua's ARGV[3] that gives the caller's
// networks back their budgets alone: their ledgers of texts to the
// country keep the resend (their sign counts every text). A provider
// failure afterwards leaves it there: one text in a sign's ledger.
const freeResendNetworks = 3

// networks says whether the group counts the caller's networks.
func (grp group) networks() bool {
	for _, s := range grp.subjects {
		if s.kind == 'n' {
			return true
		}
	}
	return false
}
