package api

import (
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"smsgw/otp"
	"smsgw/sender/twilio"
)

// TwilioWebhook is what the status callback needs: the auth token Twilio
// signs with, and the public URL it was told to call (behind proxies the URL
// the request arrives at differs, and the signature covers the public one).
type TwilioWebhook struct {
	AuthToken   string
	CallbackURL string
}

// handleTwilioStatus takes Twilio's delivery receipts. Only requests signed
// with the account's auth token over the configured URL change anything;
// everything else is a 403.
func handleTwilioStatus(hook TwilioWebhook, deliveries otp.DeliveryLog, log *slog.Logger, m *httpMetrics) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/x-www-form-urlencoded" {
			return otp.Errorf(otp.EUnsupportedMediaType, "Content-Type must be application/x-www-form-urlencoded")
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		if err != nil {
			return &otp.Error{Code: otp.EInvalidRequest, Message: "could not read the request body", Err: err}
		}
		if len(body) > maxBody {
			return otp.Errorf(otp.ERequestTooLarge, "request body is larger than %d bytes", maxBody)
		}
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return otp.Errorf(otp.EInvalidRequest, "body is not a form")
		}
		params := make(map[string]string, len(form))
		for k, v := range form {
			params[k] = v[0]
		}
		if !twilio.ValidSignature(hook.AuthToken, hook.CallbackURL, params, r.Header.Get("X-Twilio-Signature")) {
			m.receipts.WithLabelValues("forged").Inc()
			log.WarnContext(r.Context(), "twilio status callback with a bad signature", "request_id", requestID(c), "client_ip", clientIP(c))
			return otp.Errorf(otp.EForbidden, "bad or missing X-Twilio-Signature")
		}
		upd, err := twilio.ParseStatus(params)
		if err != nil {
			m.receipts.WithLabelValues("invalid").Inc()
			return &otp.Error{Code: otp.EInvalidRequest, Message: err.Error(), Err: err}
		}
		err = deliveries.Report(r.Context(), otp.DeliveryReport{Provider: "twilio", MessageID: upd.MessageSID, Status: upd.Status, ErrorCode: upd.ErrorCode})
		if err != nil {
			return &otp.Error{Code: otp.EUnavailable, Message: "the receipt could not be stored; send it again", Err: err}
		}
		m.receipts.WithLabelValues(upd.Status).Inc()
		return c.NoContent(http.StatusNoContent)
	}
}
