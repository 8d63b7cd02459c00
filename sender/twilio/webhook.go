package twilio

import (
	"errors"
	"fmt"

	"github.com/twilio/twilio-go/client"
)

// ValidSignature reports whether signature (the X-Twilio-Signature header) is
// Twilio's signature of a webhook request: url is the full URL Twilio called
// (scheme, host, path and query, exactly as configured in StatusCallback), and
// params the POST form fields (one value per name). twilio-go accepts the URL
// with and without its default port. An empty token or signature never
// validates.
func ValidSignature(authToken, url string, params map[string]string, signature string) bool {
	if authToken == "" || signature == "" {
		return false
	}
	v := client.NewRequestValidator(authToken)
	return v.Validate(url, params, signature)
}

// StatusUpdate is one delivery receipt from Twilio's status callback.
type StatusUpdate struct {
	MessageSID string // "SM..." or "MM..."
	Status     string // one of Twilio's message statuses, e.g. "delivered"
	ErrorCode  string // Twilio error code (e.g. "30003") for failed/undelivered, else ""
}

// ErrInvalidStatus is wrapped by every error ParseStatus returns.
var ErrInvalidStatus = errors.New("invalid twilio status callback")

// statuses are Twilio's message statuses.
var statuses = map[string]bool{
	"queued": true, "accepted": true, "scheduled": true, "sending": true, "sent": true,
	"delivered": true, "undelivered": true, "failed": true, "read": true, "canceled": true,
	"receiving": true, "received": true,
}

// ParseStatus reads a status callback's form fields: MessageSid, MessageStatus
// and ErrorCode (SmsSid and SmsStatus, the legacy names Twilio still sends,
// stand in when the new ones are missing).
func ParseStatus(params map[string]string) (StatusUpdate, error) {
	sid := params["MessageSid"]
	if sid == "" {
		sid = params["SmsSid"]
	}
	status := params["MessageStatus"]
	if status == "" {
		status = params["SmsStatus"]
	}
	code := params["ErrorCode"]

	switch {
	case sid == "":
		return StatusUpdate{}, fmt.Errorf("%w: MessageSid missing", ErrInvalidStatus)
	case !isSID(sid, "SM") && !isSID(sid, "MM"):
		return StatusUpdate{}, fmt.Errorf("%w: MessageSid %.40q is not a message sid", ErrInvalidStatus, sid)
	case status == "":
		return StatusUpdate{}, fmt.Errorf("%w: MessageStatus missing", ErrInvalidStatus)
	case !statuses[status]:
		return StatusUpdate{}, fmt.Errorf("%w: unknown MessageStatus %.40q", ErrInvalidStatus, status)
	case !isErrorCode(code):
		return StatusUpdate{}, fmt.Errorf("%w: ErrorCode %.40q is not a number", ErrInvalidStatus, code)
	}
	return StatusUpdate{MessageSID: sid, Status: status, ErrorCode: code}, nil
}

// isErrorCode accepts "" or up to 10 digits.
func isErrorCode(s string) bool {
	if len(s) > 10 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
