package region

import (
	"context"
	"fmt"
	"time"

	"smsgw/otp"
)

// fallbackSubjects are the local ledger's stand-ins for a home's subjects:
// the same keys under the home's name, each window capped at the fallback
// allowance. So over any window this region admits at most Fallback per
// key without its home, however often the link comes and goes, and R
// regions admit at most L + (R-1)·Fallback.
func (d *Deployment) fallbackSubjects(remote part) []otp.Subject {
	out := make([]otp.Subject, len(remote.subjects))
	for i, s := range remote.subjects {
		rules := make([]otp.Rule, len(s.Rules))
		for j, r := range s.Rules {
			rules[j] = otp.Rule{Window: r.Window, Max: min(r.Max, d.o.Fallback)}
		}
		out[i] = otp.Subject{Scope: s.Scope, Name: s.Name, Key: "fb:" + remote.store.Name + ":" + s.Key, Rules: rules}
	}
	return out
}

// fallbackAllow decides the home's subjects on the local ledger and, when
// admitted, records the admission to be carried home once the home answers
// again. An admission that cannot be recorded is taken back: none goes
// unrecorded.
func (d *Deployment) fallbackAllow(ctx context.Context, ticket string, remote part) (otp.Decision, error) {
	fb := d.fallbackSubjects(remote)
	dec, err := d.local.Limiter.Allow(ctx, ticket, fb)
	if err != nil || !dec.Allowed {
		return dec, err
	}
	if err := d.carryHome(ctx, ticket, remote, dec.Now); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if rerr := d.local.Limiter.Refund(rctx, ticket, fb); rerr != nil {
			d.o.Log.WarnContext(ctx, "fallback admission not refunded; it stays counted", "err", rerr)
		}
		return otp.Decision{}, err
	}
	return dec, nil
}

// carryHome records an admission of remote's subjects made from the
// fallback ledger at now (the local Redis clock), to be carried home once
// the home answers again; the caller takes back an admission it cannot
// record, so none goes unrecorded.
func (d *Deployment) carryHome(ctx context.Context, ticket string, remote part, now time.Time) error {
	if err := d.carry.add(ctx, remote.store.Name, entry{Ticket: ticket, At: now.UnixMicro(), Subjects: carried(remote.subjects)}); err != nil {
		return fmt.Errorf("region: record a fallback admission: %w", err)
	}
	d.fallbacks.Add(1)
	return nil
}
