package console

import (
	"net/http"
	"strings"
	"time"

	"smsgw/otp"
	"smsgw/pumping"
)

type pumpingData struct {
	Held, Near []otp.PumpingHold
	// Restricted are the held countries in the restricted state, and
	// RestrictedOperators the operators: they still serve the sends that
	// carry a sign of a real user.
	Restricted, RestrictedOperators restrictedTable
	Overrides                       []otp.Override
	Err                             string
	ExpiryChoices                   []expiryChoice
	Off                             bool
}

// restrictedTable is one table of restricted subjects: a country's or an
// operator's, Noun heading its first column.
type restrictedTable struct {
	Noun string
	Rows []otp.PumpingHold
}

// pumpingPage shows what the pumping rules hold, what is near its budget,
// and the operators' overrides.
func (c *Console) pumpingPage(w http.ResponseWriter, r *http.Request, a *action) error {
	d := pumpingData{ExpiryChoices: expiryChoices, Off: c.d.Pumping == nil,
		Restricted: restrictedTable{Noun: "Country"}, RestrictedOperators: restrictedTable{Noun: "Operator"}}
	p := page{Title: "Pumping", Nav: "pumping", Notice: notices[r.URL.Query().Get("done")], Data: &d}
	if c.d.Pumping != nil {
		ctx := r.Context()
		var err1, err2 error
		d.Held, d.Near, err1 = c.d.Pumping.Holds(ctx)
		d.Overrides, err2 = c.d.Pumping.ListOverrides(ctx)
		for _, h := range d.Held {
			switch {
			case h.Restricted == nil:
			case h.Rule == pumping.RuleOperator:
				d.RestrictedOperators.Rows = append(d.RestrictedOperators.Rows, h)
			default:
				d.Restricted.Rows = append(d.Restricted.Rows, h)
			}
		}
		for _, err := range []error{err1, err2} {
			if err != nil {
				c.log.WarnContext(ctx, "pumping state not read", "err", err)
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

// liftHold forgets a held subject's counts on every replica.
func (c *Console) liftHold(w http.ResponseWriter, r *http.Request, a *action) error {
	if err := c.needPumping(); err != nil {
		return err
	}
	rule, subject := r.PostFormValue("rule"), r.PostFormValue("subject")
	a.target = rule + ":" + subject
	if rule == "" || subject == "" {
		return otp.Errorf(otp.EInvalidRequest, "which hold? (rule and subject)")
	}
	if err := c.d.Pumping.Lift(r.Context(), rule, subject); err != nil {
		return pumpingError(err)
	}
	http.Redirect(w, r, back(r, "lifted"), http.StatusSeeOther)
	return nil
}

// overrideTarget accepts a number in any notation, or a range written as
// "+" and its leading digits.
func (c *Console) overrideTarget(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if len(raw) >= 2 && len(raw) <= 16 && raw[0] == '+' && strings.Trim(raw[1:], "0123456789") == "" {
		return raw, nil
	}
	ph, err := c.parsePhone(raw, "")
	if err != nil {
		return "", otp.Errorf(otp.EInvalidRequest, "a target is a phone number, or a range such as +23324")
	}
	return ph.E164, nil
}

// formTarget is the override target an action's form names, once the
// pumping defence is known to be there.
func (c *Console) formTarget(r *http.Request) (string, error) {
	if err := c.needPumping(); err != nil {
		return "", err
	}
	return c.overrideTarget(r.PostFormValue("target"))
}

// addOverride allows or blocks a number or range until it expires.
func (c *Console) addOverride(w http.ResponseWriter, r *http.Request, a *action) error {
	target, err := c.formTarget(r)
	if err != nil {
		return err
	}
	act := otp.OverrideAction(r.PostFormValue("action"))
	a.target = string(act) + ":" + target
	if act != otp.OverrideAllow && act != otp.OverrideBlock {
		return otp.Errorf(otp.EInvalidRequest, "the decision is allow or block")
	}
	ttl, err := time.ParseDuration(r.PostFormValue("expires"))
	if err != nil || ttl < time.Minute || ttl > 90*24*time.Hour {
		return otp.Errorf(otp.EInvalidRequest, "an override expires after a minute to 90 days")
	}
	note := strings.TrimSpace(r.PostFormValue("note"))
	if len(note) > 200 {
		return otp.Errorf(otp.EInvalidRequest, "a note is at most 200 characters")
	}
	if _, err := otp.ParsePhone(target, ""); err == nil {
		a.phone = target
	}
	now := c.opt.Now().UTC()
	o := otp.Override{Target: target, Action: act, Note: note, ExpiresAt: now.Add(ttl), CreatedAt: now}
	if err := c.d.Pumping.SetOverride(r.Context(), o); err != nil {
		return pumpingError(err)
	}
	http.Redirect(w, r, back(r, "override"), http.StatusSeeOther)
	return nil
}

// liftOverride deletes the override of a target.
func (c *Console) liftOverride(w http.ResponseWriter, r *http.Request, a *action) error {
	target, err := c.formTarget(r)
	if err != nil {
		return err
	}
	a.target = target
	if err := c.d.Pumping.DeleteOverride(r.Context(), target); err != nil {
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
