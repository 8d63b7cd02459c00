package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"smsgw/otp"
)

type pumpingHoldJSON struct {
	Rule      string  `json:"rule"`
	Subject   string  `json:"subject"`
	Used      float64 `json:"used"`
	Limit     float64 `json:"limit"`
	ExpiresIn int64   `json:"expires_in"` // seconds the hold (or the listing) lasts if nothing is approved
	// Restricted is set on a country in the restricted state: it still
	// serves sends that carry a sign of a real user.
	Restricted *restrictionJSON `json:"restricted,omitempty"`
}

// restrictionJSON says since when a country is restricted, why, and what
// happened to its sends since: the console's "Restricted countries" table.
type restrictionJSON struct {
	Since      time.Time `json:"since"`
	Until      time.Time `json:"until"`
	Unverified float64   `json:"unverified"`
	Budget     float64   `json:"budget"`
	Over       string    `json:"over"` // "window" or "hour": which budget tripped
	// Abroad: only the sends from networks known for other countries'
	// users are restricted; the country's own are served.
	Abroad  bool  `json:"abroad"`
	Refused int64 `json:"refused"`
	Served  struct {
		Returning int64 `json:"returning"`
		Network   int64 `json:"network"`
		Challenge int64 `json:"challenge"`
	} `json:"served"`
}

func restrictionOf(r *otp.CountryRestriction) *restrictionJSON {
	if r == nil {
		return nil
	}
	out := &restrictionJSON{Since: r.Since.UTC(), Until: r.Until.UTC(), Unverified: r.Unverified, Budget: r.Budget,
		Over: "window", Abroad: r.Abroad, Refused: r.Refused}
	if r.Hour {
		out.Over = "hour"
	}
	out.Served.Returning, out.Served.Network, out.Served.Challenge = r.ServedReturning, r.ServedNetwork, r.ServedChallenge
	return out
}

type pumpingJSON struct {
	Held      []pumpingHoldJSON `json:"held"`
	Near      []pumpingHoldJSON `json:"near"`
	Overrides []otp.Override    `json:"overrides"`
}

func holdsJSON(list []otp.PumpingHold) []pumpingHoldJSON {
	out := make([]pumpingHoldJSON, 0, len(list))
	for _, h := range list {
		out = append(out, pumpingHoldJSON{Rule: h.Rule, Subject: h.Subject, Used: h.Used, Limit: h.Limit, ExpiresIn: ceilSeconds(h.Remaining),
			Restricted: restrictionOf(h.Restricted)})
	}
	return out
}

// overridesJSON answers [] rather than null for none.
func overridesJSON(list []otp.Override) []otp.Override {
	if list == nil {
		return []otp.Override{}
	}
	return list
}

// pumpingView is what GET /v1/admin/pumping shows: held subjects, those near
// their budgets, and the overrides.
func pumpingView(ctx context.Context, p otp.PumpingAdmin) (pumpingJSON, error) {
	held, near, err := p.Holds(ctx)
	if err != nil {
		return pumpingJSON{}, err
	}
	ov, err := p.ListOverrides(ctx)
	if err != nil {
		return pumpingJSON{}, err
	}
	return pumpingJSON{Held: holdsJSON(held), Near: holdsJSON(near), Overrides: overridesJSON(ov)}, nil
}

func pumpingUnavailable(err error) error {
	var e *otp.Error
	if errors.As(err, &e) {
		return e
	}
	return &otp.Error{Code: otp.EUnavailable, Message: "the pumping guard is temporarily unavailable", Err: err}
}

// handleAdminPumping lists (GET) what the pumping rules hold, or lifts
// (DELETE ?rule=&subject=) one hold on every replica: the subject's counts
// start afresh.
func (s *Server) handleAdminPumping(c echo.Context) error {
	ctx := c.Request().Context()
	if c.Request().Method == http.MethodDelete {
		rule, subject := c.QueryParam("rule"), otp.PlusFromQuery(c.QueryParam("subject"))
		var err error
		if rule == "" || subject == "" {
			err = otp.Errorf(otp.EInvalidRequest, "rule and subject are required, as GET /v1/admin/pumping lists them")
		} else if lerr := s.Pumping.Lift(ctx, rule, subject); lerr != nil {
			err = pumpingUnavailable(lerr)
		}
		s.auditAdmin(c, "pumping.lift:"+rule+":"+subject, "", err)
		if err != nil {
			return err
		}
	}
	v, err := pumpingView(ctx, s.Pumping)
	if c.Request().Method == http.MethodGet {
		s.auditAdmin(c, "pumping.list", "", err)
	}
	if err != nil {
		return pumpingUnavailable(err)
	}
	return c.JSON(http.StatusOK, v)
}

// overrideRequest is POST /v1/admin/overrides's body. expires_in (seconds)
// or expires_at (RFC 3339), one of them.
type overrideRequest struct {
	Target    string     `json:"target"`
	Action    string     `json:"action"`
	Note      string     `json:"note"`
	ExpiresIn *int64     `json:"expires_in"`
	ExpiresAt *time.Time `json:"expires_at"`
}

// maxOverrideFor bounds an override: a forgotten allow must not exempt a
// range forever.
const maxOverrideFor = 365 * 24 * time.Hour

func decodeOverride(c echo.Context, now time.Time) (otp.Override, error) {
	var req overrideRequest
	dec := json.NewDecoder(io.LimitReader(c.Request().Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return otp.Override{}, otp.Errorf(otp.EInvalidRequest, "body must be a JSON object with target, action, note and expires_in or expires_at")
	}
	o := otp.Override{Target: strings.TrimSpace(req.Target), Action: otp.OverrideAction(req.Action), Note: req.Note, CreatedAt: now}
	switch {
	case req.ExpiresIn != nil && req.ExpiresAt == nil:
		if *req.ExpiresIn < 1 || time.Duration(*req.ExpiresIn)*time.Second > maxOverrideFor {
			return o, otp.Errorf(otp.EInvalidRequest, "expires_in must be 1 to %d seconds", int64(maxOverrideFor/time.Second))
		}
		o.ExpiresAt = now.Add(time.Duration(*req.ExpiresIn) * time.Second)
	case req.ExpiresAt != nil && req.ExpiresIn == nil:
		if req.ExpiresAt.Sub(now) > maxOverrideFor {
			return o, otp.Errorf(otp.EInvalidRequest, "expires_at must be within a year")
		}
		o.ExpiresAt = req.ExpiresAt.UTC()
	default:
		return o, otp.Errorf(otp.EInvalidRequest, "give exactly one of expires_in and expires_at")
	}
	return o, nil
}

// handleAdminOverrides lists (GET), sets (POST) or deletes (DELETE ?target=)
// operators' overrides: allow exempts a number or range from the pumping
// rules and the spend ceiling (never the windows); block refuses it.
func (s *Server) handleAdminOverrides(c echo.Context) error {
	ctx := c.Request().Context()
	switch c.Request().Method {
	case http.MethodPost:
		o, err := decodeOverride(c, time.Now().UTC())
		if err == nil {
			err = s.Pumping.SetOverride(ctx, o)
		}
		s.auditAdmin(c, "override.set:"+string(o.Action)+":"+o.Target, "", err)
		if err != nil {
			return pumpingUnavailable(err)
		}
	case http.MethodDelete:
		target := otp.PlusFromQuery(c.QueryParam("target"))
		err := s.Pumping.DeleteOverride(ctx, target)
		s.auditAdmin(c, "override.delete:"+target, "", err)
		if err != nil {
			return pumpingUnavailable(err)
		}
	}
	list, err := s.Pumping.ListOverrides(ctx)
	if c.Request().Method == http.MethodGet {
		s.auditAdmin(c, "override.list", "", err)
	}
	if err != nil {
		return pumpingUnavailable(err)
	}
	return c.JSON(http.StatusOK, overridesJSON(list))
}
