package console

import (
	"net/http"
	"strings"
	"time"

	"smsgw/otp"
)

type pumpingData struct {
	Holds         []Hold
	Budgets       []Budget
	Overrides     []Override
	Err           string
	ExpiryChoices []expiryChoice
	Off           bool
}

// pumpingPage shows the holds, the ranges nearest their budgets and the
// operators' overrides.
func (c *Console) pumpingPage(w http.ResponseWriter, r *http.Request, a *action) error {
	d := pumpingData{ExpiryChoices: expiryChoices, Off: c.d.Pumping == nil}
	p := page{Title: "Pumping", Nav: "pumping", Notice: notices[r.URL.Query().Get("done")], Data: &d}
	if c.d.Pumping != nil {
		ctx := r.Context()
		var errs []error
		var err error
		d.Holds, err = c.d.Pumping.Holds(ctx)
		errs = append(errs, err)
		d.Budgets, err = c.d.Pumping.Budgets(ctx, 20)
		errs = append(errs, err)
		d.Overrides, err = c.d.Pumping.Overrides(ctx)
		errs = append(errs, err)
		for _, err := range errs {
			if err != nil {
				c.log.WarnContext(ctx, "console: pumping state unavailable", "err", err)
				d.Err = "part of the pumping state is unavailable right now"
			}
		}
	}
	c.render(w, r, http.StatusOK, "pumping", &a.sess, p)
	return nil
}

func (c *Console) needPumping() error {
	if c.d.Pumping == nil {
		return otp.Errorf(otp.ENotFound, "the pumping defence is off")
	}
	return nil
}

// back returns to the page a form came from (a phone look-up or the
// pumping page).
func back(r *http.Request, done string) string {
	if ph := r.PostFormValue("back_phone"); ph != "" {
		return phoneURL(ph, done)
	}
	return "/console/pumping?done=" + done
}

func (c *Console) liftHold(w http.ResponseWriter, r *http.Request, a *action) error {
	if err := c.needPumping(); err != nil {
		return err
	}
	key := r.PostFormValue("key")
	a.target = key
	if key == "" {
		return otp.Errorf(otp.EInvalidRequest, "which hold?")
	}
	if err := c.d.Pumping.LiftHold(r.Context(), key); err != nil {
		return pumpingError(err)
	}
	http.Redirect(w, r, back(r, "lifted"), http.StatusSeeOther)
	return nil
}

// overrideTarget accepts a number in any notation, or a prefix written as
// "+" and digits.
func (c *Console) overrideTarget(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if len(raw) >= 2 && len(raw) <= 16 && raw[0] == '+' && strings.Trim(raw[1:], "0123456789") == "" {
		return raw, nil
	}
	ph, err := c.parsePhone(raw, "")
	if err != nil {
		return "", otp.Errorf(otp.EInvalidRequest, "a target is a phone number, or a prefix such as +23324")
	}
	return ph.E164, nil
}

func (c *Console) addOverride(w http.ResponseWriter, r *http.Request, a *action) error {
	if err := c.needPumping(); err != nil {
		return err
	}
	target, err := c.overrideTarget(r.PostFormValue("target"))
	if err != nil {
		return err
	}
	act := r.PostFormValue("action")
	a.target = act + ":" + target
	if act != "allow" && act != "block" {
		return otp.Errorf(otp.EInvalidRequest, "the action is allow or block")
	}
	ttl, err := time.ParseDuration(r.PostFormValue("expires"))
	if err != nil || ttl < time.Minute || ttl > 90*24*time.Hour {
		return otp.Errorf(otp.EInvalidRequest, "an override expires after a minute to 90 days")
	}
	note := strings.TrimSpace(r.PostFormValue("note"))
	if len(note) > 200 {
		return otp.Errorf(otp.EInvalidRequest, "a note is at most 200 characters")
	}
	if strings.HasPrefix(target, "+") && len(target) >= 8 {
		a.phone = target
	}
	o := Override{Target: target, Action: act, Expires: c.opt.Now().Add(ttl), Note: note}
	if err := c.d.Pumping.AddOverride(r.Context(), o); err != nil {
		return pumpingError(err)
	}
	http.Redirect(w, r, back(r, "override"), http.StatusSeeOther)
	return nil
}

func (c *Console) liftOverride(w http.ResponseWriter, r *http.Request, a *action) error {
	if err := c.needPumping(); err != nil {
		return err
	}
	target, err := c.overrideTarget(r.PostFormValue("target"))
	if err != nil {
		return err
	}
	a.target = target
	if err := c.d.Pumping.LiftOverride(r.Context(), target); err != nil {
		return pumpingError(err)
	}
	http.Redirect(w, r, back(r, "lifted"), http.StatusSeeOther)
	return nil
}

// pumpingError keeps a domain error's code and makes anything else a 503.
func pumpingError(err error) error {
	if otp.ErrorCode(err) != otp.EInternal {
		return err
	}
	return &otp.Error{Code: otp.EUnavailable, Message: "the pumping defence is unavailable right now", Err: err}
}
