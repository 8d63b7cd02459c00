package console

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"smsgw/otp"
)

type windowRow struct {
	Policy, Scope, Window string
	Used, Limit           int
	Reset                 time.Duration
}

type codeState struct {
	Pending      bool
	Attempts     int
	AttemptsLeft int
	ExpiresIn    time.Duration
}

type phoneData struct {
	Query, Region  string
	E164, Type     string
	Country        string
	Windows        []windowRow
	Code           *codeState
	Trail          []otp.AuditEvent
	TrailErr       string
	Overrides      []otp.Override
	Holds          []otp.PumpingHold // pumping holds covering the number
	CanCancel      bool
	CanOverride    bool
	ExpiryChoices  []expiryChoice
	AuditAvailable bool
	// Verifications are the number's newest (Postgres).
	Verifications    []otp.Verification
	VerificationsOn  bool
	VerificationsErr string
}

type expiryChoice struct{ Value, Label string }

var expiryChoices = []expiryChoice{{"1h", "1 hour"}, {"24h", "1 day"}, {"168h", "7 days"}, {"720h", "30 days"}}

func windowRows(v otp.SupportView) []windowRow {
	rows := make([]windowRow, len(v.Windows))
	for i, w := range v.Windows {
		rows[i] = windowRow{Policy: w.Policy, Scope: w.Scope, Window: w.Rule.Label(), Used: w.Used, Limit: w.Rule.Max, Reset: w.Reset}
	}
	return rows
}

var notices = map[string]string{
	"reset":     "Limits reset: every window is empty.",
	"resetheld": "Limits reset and pumping holds lifted: every window is empty, and no range or country holds the number.",
	"cancelled": "The pending code is cancelled.",
	"nocode":    "There was no pending code to cancel.",
	"override":  "Override saved.",
	"lifted":    "Lifted.",
	"retried":   "The delivery is back in the queue.",
	"notfailed": "That delivery is not failed any more.",
}

// phonePage looks a number up in any notation.
func (c *Console) phonePage(w http.ResponseWriter, r *http.Request, a *action) error {
	q := r.URL.Query()
	d := phoneData{Query: q.Get("phone"), Region: strings.ToUpper(q.Get("region")), CanCancel: c.d.Codes != nil,
		CanOverride: c.d.Pumping != nil, ExpiryChoices: expiryChoices, AuditAvailable: c.d.Audit != nil}
	p := page{Title: "Phone look-up", Nav: "phone", Notice: notices[q.Get("done")], Data: &d}
	if strings.TrimSpace(d.Query) == "" {
		c.render(w, r, http.StatusOK, "phone", &a.sess, p)
		return nil
	}
	err := c.lookUpPhone(r, a, &d)
	return c.renderResult(w, r, "phone", &a.sess, p, err)
}

func (c *Console) parsePhone(raw, region string) (otp.Phone, error) {
	if region == "" {
		region = c.opt.DefaultRegion
	}
	return otp.ParsePhone(raw, region)
}

func (c *Console) lookUpPhone(r *http.Request, a *action, d *phoneData) error {
	ctx := r.Context()
	ph, err := c.parsePhone(d.Query, d.Region)
	if err != nil {
		return err
	}
	d.E164, d.Type, d.Country = ph.E164, ph.Type, ph.Country()
	a.phone = ph.E164
	v, err := c.d.Support.Limits(ctx, ph.E164, "")
	if err != nil {
		return err
	}
	d.Windows = windowRows(v)
	d.Code = &codeState{}
	if v.Code != nil {
		d.Code = &codeState{Pending: true, Attempts: v.Code.Attempts,
			AttemptsLeft: max(c.opt.MaxAttempts-v.Code.Attempts, 0), ExpiresIn: v.Code.ExpiresIn}
	}
	if c.d.Audit != nil {
		trail, err := c.d.Audit.Search(ctx, otp.AuditQuery{Phone: ph.E164, Limit: 50})
		if err != nil {
			d.TrailErr = "the audit log is unavailable right now"
		}
		d.Trail = trail
	}
	c.verificationsOf(ctx, ph.E164, d)
	if c.d.Pumping != nil {
		d.Holds, _ = c.holdsCovering(ctx, ph) // unavailable: the page shows none
		all, err := c.d.Pumping.ListOverrides(ctx)
		if err == nil {
			for _, o := range all {
				if strings.HasPrefix(ph.E164, o.Target) {
					d.Overrides = append(d.Overrides, o)
				}
			}
		}
	}
	return nil
}

func errorMessage(err error) string {
	var e *otp.Error
	if asOTPError(err, &e) && e.Code != otp.EInternal && e.Message != "" {
		return e.Message
	}
	return "something went wrong; the log has the details"
}

func phoneURL(e164, done string) string {
	return "/console/phone?phone=" + url.QueryEscape(e164) + "&done=" + done
}

// phoneReset clears every window of a number ("Reset limits"), and with
// the box ticked lifts the pumping holds covering it.
func (c *Console) phoneReset(w http.ResponseWriter, r *http.Request, a *action) error {
	ph, err := c.parsePhone(r.PostFormValue("phone"), "")
	if err != nil {
		return err
	}
	a.phone = ph.E164
	if _, err := c.d.Support.ResetLimits(r.Context(), ph.E164, ""); err != nil {
		return err
	}
	done := "reset"
	if r.PostFormValue("pumping") == "true" && c.d.Pumping != nil {
		if err := c.liftCovering(r.Context(), ph, a); err != nil {
			return err
		}
		done = "resetheld"
	}
	http.Redirect(w, r, phoneURL(ph.E164, done), http.StatusSeeOther)
	return nil
}

// phoneCancel deletes the number's pending code: the person asks for a new
// one, or support suspects it leaked.
func (c *Console) phoneCancel(w http.ResponseWriter, r *http.Request, a *action) error {
	if c.d.Codes == nil {
		return otp.Errorf(otp.ENotFound, "cancelling codes is not available here")
	}
	ph, err := c.parsePhone(r.PostFormValue("phone"), "")
	if err != nil {
		return err
	}
	a.phone = ph.E164
	had, err := c.d.Codes.Cancel(r.Context(), ph.E164)
	if err != nil {
		return &otp.Error{Code: otp.EUnavailable, Message: "the code store is unavailable right now", Err: err}
	}
	done := "cancelled"
	if !had {
		done = "nocode"
	}
	http.Redirect(w, r, phoneURL(ph.E164, done), http.StatusSeeOther)
	return nil
}
