package console

import (
	"net/http"
	"strconv"
	"strings"

	"smsgw/otp"
)

// secure says whether the browser reached us over TLS (directly or through
// a proxy that says so): then the cookie is Secure. Believing a forged
// X-Forwarded-Proto only makes a cookie stricter.
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// safeNext keeps a post-sign-in redirect inside the console.
func safeNext(s string) string {
	if strings.HasPrefix(s, "/console") && !strings.HasPrefix(s, "//") && !strings.ContainsAny(s, "\\\r\n") {
		return s
	}
	return "/console"
}

// home is the overview when signed in, else the sign-in form.
func (c *Console) home(w http.ResponseWriter, r *http.Request) {
	if _, ok := c.sessions.from(r); ok {
		c.signedIn("overview.get", c.overviewPage)(w, r)
		return
	}
	c.render(w, r, http.StatusOK, "signin", nil, page{Title: "Sign in", Data: signinData{Next: safeNext(r.URL.Query().Get("next"))}})
}

type signinData struct{ Next string }

// signIn trades the admin token for a session cookie. Failures are counted
// per client address, with the admin API's, and refused past the limit.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	a := &action{name: "signin", ip: c.opt.ClientIP(r), reqID: w.Header().Get("X-Request-ID")}
	next := safeNext(r.PostFormValue("next"))
	data := page{Title: "Sign in", Data: signinData{Next: next}}
	if wait, blocked := c.d.Failures.Blocked(a.ip); blocked {
		err := otp.Errorf(otp.ERateLimited, "too many failed sign-ins from your address; try again in %s", humanDuration(wait))
		c.audit(r.Context(), a, err)
		w.Header().Set("Retry-After", strconv.FormatInt(int64((wait+999_999_999)/1e9), 10))
		data.Error = err.Message
		c.render(w, r, http.StatusTooManyRequests, "signin", nil, data)
		return
	}
	if !sameOrigin(r) {
		err := otp.Errorf(otp.EForbidden, "this sign-in came from another site")
		c.audit(r.Context(), a, err)
		data.Error = err.Message
		c.render(w, r, http.StatusForbidden, "signin", nil, data)
		return
	}
	if !tokenMatches(r.PostFormValue("token"), c.opt.AdminToken) {
		c.d.Failures.Failed(a.ip)
		err := otp.Errorf(otp.EUnauthorized, "that admin token is not right")
		c.audit(r.Context(), a, err)
		data.Error = "That admin token is not right."
		c.render(w, r, http.StatusUnauthorized, "signin", nil, data)
		return
	}
	sess, cookie := c.sessions.start(secure(r))
	a.sess = sess
	c.audit(r.Context(), a, nil)
	http.SetCookie(w, cookie)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) signOut(w http.ResponseWriter, r *http.Request, a *action) error {
	c.sessions.revoke(a.sess)
	http.SetCookie(w, c.sessions.clear(secure(r)))
	http.Redirect(w, r, "/console", http.StatusSeeOther)
	return nil
}
