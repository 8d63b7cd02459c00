package pumping

// Release: taking back what decide.lua counted for a send that was never
// texted (release.lua).

import (
	"context"
	"fmt"

	"smsgw/otp"
)

// releaseCounted takes back what the calls that counted the send counted
// (errs may be nil when every call answered); failing, it logs msg.
func (g *Guard) releaseCounted(ctx context.Context, phone otp.Phone, calls []call, errs []error, msg string) {
	var counted []call
	for i, c := range calls {
		if (errs == nil || errs[i] == nil) && c.reply.verdict.counted() {
			counted = append(counted, c)
		}
	}
	if len(counted) == 0 {
		return
	}
	res := otp.PumpingReservation{Ticket: &reservation{phone: phone.E164, calls: counted}}
	if err := g.Release(context.WithoutCancel(ctx), res); err != nil {
		g.log.WarnContext(ctx, msg, "err", err)
	}
}

// Release takes back what a reservation counted.
func (g *Guard) Release(ctx context.Context, r otp.PumpingReservation) error {
	t, ok := r.Ticket.(*reservation)
	if !ok || t == nil {
		return nil
	}
	var first error
	for _, c := range t.calls {
		args := make([]any, 0, 4+2*len(c.grp.subjects))
		args = append(args, c.bucket, t.phone, c.recorded, flag(c.grp.record != ""), len(c.grp.subjects))
		for _, s := range c.grp.subjects {
			amount := s.price
			if s.kind == 'c' {
				amount = c.cnew
			}
			args = append(args, s.arg(), amount)
		}
		if err := g.scriptsFor(c.grp, c.country).Run(ctx, releaseScript, c.grp.keys(), args...).Err(); err != nil && first == nil {
			first = fmt.Errorf("pumping: release: %w", err)
		}
	}
	return first
}
