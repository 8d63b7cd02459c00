package audit

import (
	"context"
	"encoding/json"
	"io"
	"sync"
	"time"

	"smsgw/otp"
)

// JSONLines is an otp.AuditLog that prints one JSON object per event, for dev
// mode where there is no Postgres.
type JSONLines struct {
	mu sync.Mutex
	w  io.Writer
}

// NewJSONLines returns a JSONLines writing to w.
func NewJSONLines(w io.Writer) *JSONLines { return &JSONLines{w: w} }

type jsonRow struct {
	Audit             string    `json:"audit"`
	ID                string    `json:"id"`
	CreatedAt         time.Time `json:"created_at"`
	Kind              string    `json:"kind"`
	Outcome           string    `json:"outcome"`
	RequestID         string    `json:"request_id"`
	PhoneE164         string    `json:"phone_e164,omitempty"`
	ClientIP          string    `json:"client_ip,omitempty"`
	Reason            string    `json:"reason,omitempty"`
	Provider          string    `json:"provider,omitempty"`
	ProviderMessageID string    `json:"provider_message_id,omitempty"`
	APIKey            string    `json:"api_key,omitempty"`
}

// Accepting is always nil: stderr does not fill up.
func (j *JSONLines) Accepting() error { return nil }

// Record writes e as one line.
func (j *JSONLines) Record(_ context.Context, e otp.AuditEvent) error {
	row := jsonRow{Audit: "audit_log", ID: e.ID, CreatedAt: e.Time, Kind: e.Kind, Outcome: e.Outcome,
		RequestID: e.RequestID, PhoneE164: e.Phone, Reason: e.Reason, Provider: e.Provider, ProviderMessageID: e.MessageID,
		APIKey: e.APIKey}
	if e.ClientIP.IsValid() {
		row.ClientIP = e.ClientIP.String()
	}
	b, err := json.Marshal(row)
	if err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	_, err = j.w.Write(append(b, '\n'))
	return err
}
