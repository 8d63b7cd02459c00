package console

import (
	"context"
	"strings"

	"smsgw/otp"
)

// holdsCovering lists the pumping holds that refuse the number whatever its
// windows say: a held range of it, its operator or its country.
func (c *Console) holdsCovering(ctx context.Context, ph otp.Phone) ([]otp.PumpingHold, error) {
	held, _, err := c.d.Pumping.Holds(ctx)
	if err != nil {
		return nil, pumpingError(err)
	}
	return otp.HoldsCovering(held, ph), nil
}

// liftCovering lifts the holds covering the number on every replica; the
// action's audit row names each one lifted.
func (c *Console) liftCovering(ctx context.Context, ph otp.Phone, a *action) error {
	held, err := c.holdsCovering(ctx, ph)
	if err != nil {
		return err
	}
	var lifted []string
	defer func() {
		if len(lifted) > 0 {
			a.target = "pumping.lift:" + strings.Join(lifted, ",")
		}
	}()
	for _, h := range held {
		if err := c.d.Pumping.Lift(ctx, h.Rule, h.Subject); err != nil {
			return pumpingError(err)
		}
		lifted = append(lifted, h.Rule+":"+h.Subject)
	}
	return nil
}
