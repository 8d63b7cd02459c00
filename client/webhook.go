package client

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Errors of Webhook.Verify, for errors.Is.
var (
	// ErrSignature: no webhook-signature matches the body (forged, altered,
	// or signed with another secret).
	ErrSignature = errors.New("smsgw webhook: no signature matches")
	// ErrTimestamp: webhook-timestamp missing, malformed or outside the
	// tolerance (a replay of an old delivery).
	ErrTimestamp = errors.New("smsgw webhook: timestamp missing or outside the tolerance")
	// ErrHeaders: webhook-id or webhook-signature missing.
	ErrHeaders = errors.New("smsgw webhook: webhook-id or webhook-signature missing")
)

// DefaultTolerance is how far webhook-timestamp may be from now, either
// way, as the Standard Webhooks libraries have it.
const DefaultTolerance = 5 * time.Minute

// Webhook checks the deliveries of smsgw's events (docs/events.md): Standard
// Webhooks signatures, "v1,<base64 HMAC-SHA256 of id.timestamp.body>" under
// the "whsec_" secret of smsgw's [[events.webhooks]] entry.
type Webhook struct {
	key       []byte
	Tolerance time.Duration    // default DefaultTolerance
	Now       func() time.Time // default time.Now; for tests
	MaxBody   int64            // Handler's limit on a body; default 1 MiB
}

// NewWebhook reads secret, "whsec_" and the standard base64 of the key (the
// prefix may be left out, as the Standard Webhooks libraries allow).
func NewWebhook(secret string) (*Webhook, error) {
	b64 := strings.TrimPrefix(secret, "whsec_")
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(key) == 0 {
		return nil, errors.New(`smsgw webhook: the secret must be "whsec_" and the base64 of a key`)
	}
	return &Webhook{key: key, Tolerance: DefaultTolerance, Now: time.Now, MaxBody: 1 << 20}, nil
}

// Verify checks one delivery: its headers (webhook-id, webhook-timestamp,
// webhook-signature) and its body exactly as received.
func (w *Webhook) Verify(body []byte, h http.Header) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || sigs == "" {
		return ErrHeaders
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrTimestamp
	}
	now, tol := w.Now(), w.Tolerance
	if d := now.Sub(time.Unix(secs, 0)); d > tol || d < -tol {
		return ErrTimestamp
	}
	m := hmac.New(sha256.New, w.key)
	// The number as signed, not as written: "017…" is 17… to every signer.
	m.Write([]byte(id + "." + strconv.FormatInt(secs, 10) + "."))
	m.Write(body)
	want := m.Sum(nil)
	// Several space-separated "version,signature" entries: one is enough
	// (smsgw signs with one secret; several appear while a secret rotates).
	for _, s := range strings.Fields(sigs) {
		v, b64, ok := strings.Cut(s, ",")
		if !ok || v != "v1" {
			continue
		}
		// Strict: a signature with other trailing bits is another string,
		// refused as the Standard Webhooks libraries (which compare the
		// base64 text) refuse it.
		got, err := base64.StdEncoding.Strict().DecodeString(b64)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return ErrSignature
}

// Event is one delivery's body: {"type", "timestamp", "data"}.
type Event struct {
	ID        string          `json:"-"` // webhook-id: the same on every delivery of the event
	Type      string          `json:"type"`
	Timestamp time.Time       `json:"timestamp"`
	Data      json.RawMessage `json:"data"`
}

// Event types (SPEC "Events (webhooks)").
const (
	VerificationSent        = "verification.sent"
	VerificationDelivered   = "verification.delivered"
	VerificationUndelivered = "verification.undelivered"
	VerificationApproved    = "verification.approved"
	VerificationExpired     = "verification.expired"
	VerificationFailed      = "verification.failed"
	VerificationCanceled    = "verification.canceled"
	PumpingRestricted       = "pumping.restricted"
	PumpingLifted           = "pumping.lifted"
)

// VerificationEvent is the data of a verification.* event; never the code.
type VerificationEvent struct {
	VerificationID string `json:"verification_id"`
	Phone          string `json:"phone"`
	Country        string `json:"country"`
	Status         string `json:"status"`
	DeliveryStatus string `json:"delivery_status"` // "" when none is known
	APIKey         string `json:"api_key"`         // the key that started it
	RequestID      string `json:"request_id"`
}

// PumpingEvent is the data of a pumping.* event.
type PumpingEvent struct {
	Rule    string    `json:"rule"`
	Subject string    `json:"subject"`
	Since   time.Time `json:"since"`
	Why     string    `json:"why"`
}

// Verification decodes a verification.* event's data.
func (e Event) Verification() (VerificationEvent, error) {
	var v VerificationEvent
	if !strings.HasPrefix(e.Type, "verification.") {
		return v, fmt.Errorf("smsgw webhook: %q is not a verification event", e.Type)
	}
	return v, json.Unmarshal(e.Data, &v)
}

// Pumping decodes a pumping.* event's data.
func (e Event) Pumping() (PumpingEvent, error) {
	var p PumpingEvent
	if !strings.HasPrefix(e.Type, "pumping.") {
		return p, fmt.Errorf("smsgw webhook: %q is not a pumping event", e.Type)
	}
	return p, json.Unmarshal(e.Data, &p)
}

// Handler is an http.Handler for smsgw's deliveries: it verifies each and
// passes the event to handle. A nil error answers 204 (delivered); an error
// 500, so smsgw delivers it again later (with backoff, for 24 h). A bad
// signature or timestamp is 401 and never reaches handle. Deliveries are
// at least once: drop a duplicate by Event.ID.
func (w *Webhook) Handler(handle func(context.Context, Event) error) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(rw, "POST only", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, w.MaxBody))
		if err != nil {
			http.Error(rw, "body unreadable or too large", http.StatusRequestEntityTooLarge)
			return
		}
		if err := w.Verify(body, r.Header); err != nil {
			http.Error(rw, err.Error(), http.StatusUnauthorized)
			return
		}
		ev := Event{ID: r.Header.Get("webhook-id")}
		if err := json.Unmarshal(body, &ev); err != nil || ev.Type == "" {
			// Signed by smsgw yet not an event: a retry will not change it.
			http.Error(rw, "not an event", http.StatusBadRequest)
			return
		}
		if err := handle(r.Context(), ev); err != nil {
			http.Error(rw, "not handled; deliver again", http.StatusInternalServerError)
			return
		}
		rw.WriteHeader(http.StatusNoContent)
	})
}
