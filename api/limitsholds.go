package api

import (
	"context"
	"strconv"

	"github.com/labstack/echo/v4"

	"smsgw/otp"
)

// phoneHolds lists the pumping holds covering phone, so an operator asking
// why a number is refused sees them next to its windows (a held range left
// every window with room and the number still refused). With lift set
// (DELETE ?pumping=true) each is lifted on every replica first, audited
// one by one as DELETE /v1/admin/pumping would; what stays held is listed.
func (s *Server) phoneHolds(c echo.Context, e164 string, lift bool) ([]pumpingHoldJSON, error) {
	if s.Pumping == nil || e164 == "" {
		return nil, nil
	}
	phone, err := otp.ParsePhone(e164, "")
	if err != nil {
		return nil, err
	}
	ctx := c.Request().Context()
	covering := func(ctx context.Context) ([]otp.PumpingHold, error) {
		held, _, err := s.Pumping.Holds(ctx)
		if err != nil {
			return nil, pumpingUnavailable(err)
		}
		return otp.HoldsCovering(held, phone), nil
	}
	held, err := covering(ctx)
	if err != nil || !lift || len(held) == 0 {
		return holdsJSON(held), err
	}
	for _, h := range held {
		err := s.Pumping.Lift(ctx, h.Rule, h.Subject)
		if err != nil {
			err = pumpingUnavailable(err)
		}
		s.auditAdmin(c, "pumping.lift:"+h.Rule+":"+h.Subject, phone.E164, err)
		if err != nil {
			return nil, err
		}
	}
	held, err = covering(ctx)
	return holdsJSON(held), err
}

// liftPumping reads DELETE /v1/admin/limits's pumping parameter.
func liftPumping(c echo.Context) (bool, error) {
	v := c.QueryParam("pumping")
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, otp.Errorf(otp.EInvalidRequest, "pumping: want true or false, got %q", v)
	}
	return b, nil
}
