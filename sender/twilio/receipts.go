package twilio

import (
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"

	"github.com/prometheus/client_golang/prometheus"

	"smsgw/otp"
)

// ReceiptsPath is where Twilio posts delivery receipts; the public URL of it
// is sender.twilio.status_callback_url.
const ReceiptsPath = "/v1/webhooks/twilio/status"

// maxReceipt bounds a receipt's body; Twilio's are a few hundred bytes.
const maxReceipt = 16 << 10

// Receipts is the endpoint that takes this provider's delivery receipts into
// deliveries, or false when no status callback URL is configured (Twilio
// then sends none). Only requests signed with the account's auth token over
// the configured public URL change anything; everything else is a 403.
func (p *Provider) Receipts(deliveries otp.DeliveryLog, log *slog.Logger, reg prometheus.Registerer) (otp.Endpoint, bool) {
	if p.statusCallback == "" {
		return otp.Endpoint{}, false
	}
	counted := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "smsgw_delivery_receipts_total", Help: "Delivery receipts by status; forged and invalid ones too.",
	}, []string{"status"})
	reg.MustRegister(counted)
	token, public := p.authToken, p.statusCallback
	handle := func(w http.ResponseWriter, r *http.Request) error {
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/x-www-form-urlencoded" {
			return otp.Errorf(otp.EUnsupportedMediaType, "Content-Type must be application/x-www-form-urlencoded")
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxReceipt+1))
		if err != nil {
			return &otp.Error{Code: otp.EInvalidRequest, Message: "could not read the request body", Err: err}
		}
		if len(body) > maxReceipt {
			return otp.Errorf(otp.ERequestTooLarge, "request body is larger than %d bytes", maxReceipt)
		}
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return otp.Errorf(otp.EInvalidRequest, "body is not a form")
		}
		params := make(map[string]string, len(form))
		for k, v := range form {
			params[k] = v[0]
		}
		if !ValidSignature(token, public, params, r.Header.Get("X-Twilio-Signature")) {
			counted.WithLabelValues("forged").Inc()
			log.WarnContext(r.Context(), "twilio status callback with a bad signature", "remote_addr", r.RemoteAddr)
			return otp.Errorf(otp.EForbidden, "bad or missing X-Twilio-Signature")
		}
		upd, err := ParseStatus(params)
		if err != nil {
			counted.WithLabelValues("invalid").Inc()
			return &otp.Error{Code: otp.EInvalidRequest, Message: err.Error(), Err: err}
		}
		err = deliveries.Report(r.Context(), otp.DeliveryReport{Provider: "twilio", MessageID: upd.MessageSID, Status: upd.Status, ErrorCode: upd.ErrorCode})
		if err != nil {
			return &otp.Error{Code: otp.EUnavailable, Message: "the receipt could not be stored; send it again", Err: err}
		}
		counted.WithLabelValues(upd.Status).Inc()
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	return otp.Endpoint{Method: http.MethodPost, Path: ReceiptsPath, Handle: handle}, true
}
