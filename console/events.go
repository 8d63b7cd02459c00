package console

import (
	"context"
	"net/http"
	"strconv"

	"smsgw/events"
	"smsgw/otp"
)

// Verifications lists a number's verifications, newest first (Postgres;
// nil in -dev).
type Verifications interface {
	Recent(ctx context.Context, phone string, limit int) ([]otp.Verification, error)
}

// Events shows the webhook deliveries kept as failed and puts one back in
// the queue (nil without Postgres).
type Events interface {
	Failed(ctx context.Context, limit int) ([]events.FailedDelivery, error)
	Retry(ctx context.Context, seq int64) (bool, error)
}

type eventsData struct {
	Off    bool
	Failed []events.FailedDelivery
	Err    string
}

// eventsPage lists the webhook deliveries that never got a 2xx answer
// within events.retry_for, each with a Retry button.
func (c *Console) eventsPage(w http.ResponseWriter, r *http.Request, a *action) error {
	d := eventsData{Off: c.d.Events == nil}
	p := page{Title: "Events", Nav: "events", Notice: notices[r.URL.Query().Get("done")], Data: &d}
	if c.d.Events != nil {
		var err error
		if d.Failed, err = c.d.Events.Failed(r.Context(), 200); err != nil {
			c.log.WarnContext(r.Context(), "failed deliveries not read", "err", err)
			d.Err = "the event outbox is unavailable right now"
		}
	}
	c.render(w, r, http.StatusOK, "events", &a.sess, p)
	return nil
}

// retryEvent puts one failed delivery back in the queue, due now.
func (c *Console) retryEvent(w http.ResponseWriter, r *http.Request, a *action) error {
	if c.d.Events == nil {
		return otp.Errorf(otp.ENotFound, "events need Postgres")
	}
	seq, err := strconv.ParseInt(r.PostFormValue("seq"), 10, 64)
	if err != nil {
		return otp.Errorf(otp.EInvalidRequest, "no such delivery")
	}
	ok, err := c.d.Events.Retry(r.Context(), seq)
	if err != nil {
		return &otp.Error{Code: otp.EUnavailable, Message: "the event outbox is unavailable right now", Err: err}
	}
	done := "retried"
	if !ok {
		done = "notfailed"
	}
	http.Redirect(w, r, "/console/events?done="+done, http.StatusSeeOther)
	return nil
}

// verificationsOf lists phone's verifications for its page.
func (c *Console) verificationsOf(ctx context.Context, phone string, d *phoneData) {
	if c.d.Verifications == nil {
		return
	}
	d.VerificationsOn = true
	v, err := c.d.Verifications.Recent(ctx, phone, 20)
	if err != nil {
		c.log.WarnContext(ctx, "verifications not read", "err", err)
		d.VerificationsErr = "verifications are unavailable right now"
	}
	d.Verifications = v
}
