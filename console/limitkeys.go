package console

import (
	"net/http"
	"net/url"
	"strings"

	"smsgw/otp"
)

// keysData is the limit-key look-up: a backend's own subject (an account,
// a session, a device) and what its windows count.
type keysData struct {
	Names       []string // configured [[limits.key]] names
	Name, Value string
	Looked      bool
	Windows     []windowRow
}

// keysPage looks one value of a limit key up. The value is sent to Redis
// only as its HMAC and is not written to the audit row: the row names the
// key.
func (c *Console) keysPage(w http.ResponseWriter, r *http.Request, a *action) error {
	q := r.URL.Query()
	d := keysData{Name: strings.TrimSpace(q.Get("name")), Value: q.Get("value")}
	if c.d.Keys != nil {
		d.Names = c.d.Keys.LimitKeyNames()
	}
	p := page{Title: "Limit-key look-up", Nav: "keys", Notice: notices[q.Get("done")], Data: &d}
	if d.Name == "" && d.Value == "" {
		c.render(w, r, http.StatusOK, "keys", &a.sess, p)
		return nil
	}
	a.target = "key " + d.Name
	err := c.keyLimits(r, &d, false)
	return c.renderResult(w, r, "keys", &a.sess, p, err)
}

func (c *Console) keyLimits(r *http.Request, d *keysData, reset bool) error {
	if c.d.Keys == nil || len(d.Names) == 0 {
		return otp.Errorf(otp.EInvalidRequest, "no limit key is configured ([[limits.key]])")
	}
	v, err := c.d.Keys.KeyLimits(r.Context(), d.Name, d.Value, reset)
	if err != nil {
		return err
	}
	d.Looked, d.Windows = true, windowRows(v)
	return nil
}

// keyReset forgets what one value of a limit key was admitted for.
func (c *Console) keyReset(w http.ResponseWriter, r *http.Request, a *action) error {
	d := keysData{Name: strings.TrimSpace(r.PostFormValue("name")), Value: r.PostFormValue("value")}
	if c.d.Keys != nil {
		d.Names = c.d.Keys.LimitKeyNames()
	}
	a.target = "key " + d.Name
	if err := c.keyLimits(r, &d, true); err != nil {
		return err
	}
	http.Redirect(w, r, "/console/keys?"+url.Values{"name": {d.Name}, "value": {d.Value}, "done": {"reset"}}.Encode(), http.StatusSeeOther)
	return nil
}
