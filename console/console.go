// Package console is the operators' web console at /console: server-rendered
// pages over the otp domain with a little JavaScript and inline SVG charts,
// its assets embedded in the binary. Operators sign in with the admin token;
// every page view and every change is audited like an admin API call.
package console

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"smsgw/otp"
)

// Options configure the console.
type Options struct {
	// AdminToken signs operators in; empty: the console answers 404.
	AdminToken    string
	DefaultRegion string
	MaxAttempts   int
	// SessionTTL is how long a sign-in lasts (default 8h).
	SessionTTL time.Duration
	// ClientIP resolves the request's client address the way the API does
	// (trusted proxies), for the audit trail and the sign-in throttle.
	ClientIP func(*http.Request) netip.Addr
	// StatusOf maps an error code to its HTTP status (the API's one table).
	StatusOf func(code string) int
	// TextPrice estimates what one text to a country costs (the pumping
	// spend prices); nil shows no spend.
	TextPrice func(country string) float64
	Now       func() time.Time
	// Warnings about the configuration (the fake provider outside -dev)
	// head every page.
	Warnings []string
}

// Deps are what the pages run on. Codes, Audit and Pumping may be nil: the
// pages then say what is not available (in -dev there is no Postgres).
type Deps struct {
	Support  Support
	Codes    Codes
	AuditLog otp.AuditLog
	Audit    Audit
	// Pumping is the pumping defence's operator view (nil when it is off).
	Pumping otp.PumpingAdmin
	// Metrics is read for provider breakers and the audit spool's state.
	Metrics prometheus.Gatherer
	// Failures throttles wrong admin tokens per client address, shared with
	// the admin API.
	Failures *otp.AuthFailures
	// Verifications and Events are in Postgres: nil without it.
	Verifications Verifications
	Events        Events
	// Keys are the backends' limit keys (nil: the page says none is set).
	Keys Keys
}

// Console serves /console and everything under it.
type Console struct {
	log      *slog.Logger
	opt      Options
	d        Deps
	sessions *sessions
	mux      *http.ServeMux
}

// New returns the console's handler, to be mounted at /console.
func New(log *slog.Logger, o Options, d Deps) http.Handler {
	if o.AdminToken == "" {
		return http.NotFoundHandler()
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = 8 * time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ClientIP == nil {
		o.ClientIP = func(r *http.Request) netip.Addr {
			ap, _ := netip.ParseAddrPort(r.RemoteAddr)
			return ap.Addr().Unmap()
		}
	}
	if o.StatusOf == nil {
		o.StatusOf = func(string) int { return http.StatusInternalServerError }
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 5
	}
	c := &Console{log: log, opt: o, d: d, sessions: newSessions(o.AdminToken, o.SessionTTL, o.Now), mux: http.NewServeMux()}
	c.routes()
	return c
}

func (c *Console) routes() {
	m := c.mux
	m.Handle("GET /console/assets/", http.StripPrefix("/console/assets/", assetHandler()))
	m.HandleFunc("GET /console", c.home)
	m.HandleFunc("GET /console/{$}", c.home)
	m.HandleFunc("POST /console/signin", c.signIn)
	m.HandleFunc("POST /console/signout", c.signedIn("signout", c.signOut))
	m.HandleFunc("GET /console/phone", c.signedIn("phone.get", c.phonePage))
	m.HandleFunc("POST /console/phone/reset", c.signedIn("limits.delete", c.phoneReset))
	m.HandleFunc("POST /console/phone/cancel", c.signedIn("code.cancel", c.phoneCancel))
	m.HandleFunc("GET /console/network", c.signedIn("network.get", c.networkPage))
	m.HandleFunc("POST /console/network/reset", c.signedIn("limits.delete", c.networkReset))
	m.HandleFunc("GET /console/keys", c.signedIn("keys.get", c.keysPage))
	m.HandleFunc("POST /console/keys/reset", c.signedIn("limits.delete", c.keyReset))
	m.HandleFunc("GET /console/pumping", c.signedIn("pumping.get", c.pumpingPage))
	m.HandleFunc("POST /console/pumping/lift", c.signedIn("pumping.lift", c.liftHold))
	m.HandleFunc("POST /console/overrides", c.signedIn("override.set", c.addOverride))
	m.HandleFunc("POST /console/overrides/delete", c.signedIn("override.delete", c.liftOverride))
	m.HandleFunc("GET /console/audit", c.signedIn("audit.search", c.auditPage))
	m.HandleFunc("GET /console/events", c.signedIn("events.get", c.eventsPage))
	m.HandleFunc("POST /console/events/retry", c.signedIn("event.retry", c.retryEvent))
}

func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	if id := otp.RequestID(r.Context()); id != "" { // mounted in the API, which made one
		h.Set("X-Request-ID", id)
	} else if h.Get("X-Request-ID") == "" {
		h.Set("X-Request-ID", uuid.Must(uuid.NewV7()).String())
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10) // forms are small
	c.mux.ServeHTTP(w, r)
}

// action is one audited console request.
type action struct {
	sess   session
	name   string // audit reason, "console." + name
	phone  string // E.164 the action concerns, if any
	ip     netip.Addr
	reqID  string
	target string // what a change applied to, for the audit reason
}

// signedIn requires a session, and the CSRF token on every change; the
// request is audited with its outcome whatever happens.
func (c *Console) signedIn(name string, h func(http.ResponseWriter, *http.Request, *action) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess, ok := c.sessions.from(r)
		if !ok {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/console?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			c.fail(w, r, nil, otp.Errorf(otp.EUnauthorized, "your session has ended: sign in again"))
			return
		}
		a := &action{sess: sess, name: name, ip: c.opt.ClientIP(r), reqID: w.Header().Get("X-Request-ID")}
		hw := &heldWriter{ResponseWriter: w}
		var err error
		if r.Method != http.MethodGet && (!sameOrigin(r) || !sess.validCSRF(r.PostFormValue("csrf"))) {
			err = otp.Errorf(otp.EForbidden, "this form is stale or came from another site: reload the page and try again")
		} else {
			err = h(hw, r, a)
		}
		c.audit(r.Context(), a, err)
		if err != nil && !hw.wrote() {
			c.fail(w, r, &sess, err)
			return
		}
		hw.release()
	}
}

// sameOrigin refuses a change a browser says came from another site. Forms
// also carry the CSRF token; this is the second lock.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return false
		}
	}
	return true
}

// audit records a console action like an admin API call: kind admin, the
// action as reason, ok or the error code as outcome.
func (c *Console) audit(ctx context.Context, a *action, err error) {
	if c.d.AuditLog == nil {
		return
	}
	reason := "console." + a.name
	if a.target != "" {
		reason += ":" + a.target
	}
	ev := otp.AuditEvent{ID: uuid.Must(uuid.NewV7()).String(), Time: c.opt.Now().UTC(), Kind: otp.KindAdmin,
		Outcome: "ok", RequestID: a.reqID, Phone: a.phone, ClientIP: a.ip, Reason: reason}
	if err != nil {
		ev.Outcome = otp.ErrorCode(err)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if rerr := c.d.AuditLog.Record(rctx, ev); rerr != nil {
		// As for the API: no answer the audit trail lacks.
		c.log.ErrorContext(ctx, "audit row not durable: dropping the request unanswered", "request_id", a.reqID, "err", rerr)
		panic(http.ErrAbortHandler)
	}
}

// fail shows an error page with the error's status.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, sess *session, err error) {
	code := otp.ErrorCode(err)
	msg := "something went wrong; the log has the details"
	var e *otp.Error
	if asOTPError(err, &e) && code != otp.EInternal {
		msg = e.Message
	}
	if code == otp.EInternal || code == otp.EUnavailable {
		c.log.ErrorContext(r.Context(), "console request failed", "path", r.URL.Path, "err", err)
	}
	c.render(w, r, c.opt.StatusOf(code), "error", sess, page{Title: "Something went wrong", Error: msg})
}

// heldWriter holds a handler's answer until its audit row is durable: no
// operator sees the effect of an action the audit trail lacks.
type heldWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (h *heldWriter) WriteHeader(code int) {
	if h.status == 0 {
		h.status = code
	}
}

func (h *heldWriter) Write(b []byte) (int, error) {
	h.WriteHeader(http.StatusOK)
	return h.body.Write(b)
}

func (h *heldWriter) wrote() bool { return h.status != 0 }

func (h *heldWriter) release() {
	if h.status != 0 {
		h.ResponseWriter.WriteHeader(h.status)
		_, _ = h.ResponseWriter.Write(h.body.Bytes())
	}
}
