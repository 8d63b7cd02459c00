package client

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"
)

// SendRequest is the body of POST /v1/otp/send (docs/api.md).
type SendRequest struct {
	Phone          string `json:"phone"`                     // any common notation
	Region         string `json:"region,omitempty"`          // ISO 3166-1 alpha-2, for national notation
	Locale         string `json:"locale,omitempty"`          // BCP 47: the text's language
	ChallengeToken string `json:"challenge_token,omitempty"` // after *ChallengeRequired
	AppHash        string `json:"app_hash,omitempty"`        // an Android app's SMS Retriever hash
	// ClientIP is the person's address as your edge saw it: every limit and
	// pumping rule then counts it, not your backend's. Needs a key with
	// forward_client_ip = true.
	ClientIP string `json:"client_ip,omitempty"`
	// LimitKeys names your own subjects ({"user_id": "u_18342"}), each a
	// [[limits.key]] of smsgw's config. Needs a secret key.
	LimitKeys map[string]string `json:"limit_keys,omitempty"`

	// IdempotencyKey is sent as Idempotency-Key. Empty: Send makes one for
	// this call and its retries. Set it (to one value per user action) to
	// make your own retries of the action safe too.
	IdempotencyKey string `json:"-"`
}

// SendResult is a 202: the text was handed to the provider.
type SendResult struct {
	RequestID      string        // the answer's "id" (its X-Request-ID)
	VerificationID string        // the code's life: the same for every resend of one pending code
	Phone          string        // E.164
	Status         string        // "pending"
	ExpiresIn      time.Duration // the code's remaining life
	// Replayed says smsgw answered a retry with the first try's answer
	// (Idempotent-Replayed): one text, one limit hit.
	Replayed       bool
	IdempotencyKey string // the key the call used
}

// Send asks smsgw to text a code to req.Phone. It is tried again (with the
// same Idempotency-Key) when no answer came, or on 503 or 504; never after
// any other answer.
func (c *Client) Send(ctx context.Context, req SendRequest) (SendResult, error) {
	key := req.IdempotencyKey
	if key == "" {
		key = c.newKey()
	}
	a, err := c.do(ctx, request{method: "POST", path: "/v1/otp/send", body: req,
		header: map[string][]string{"Idempotency-Key": {key}}, safety: retryAnswered})
	if err != nil {
		return SendResult{}, err
	}
	var body struct {
		ID             string `json:"id"`
		VerificationID string `json:"verification_id"`
		Phone          string `json:"phone"`
		Status         string `json:"status"`
		ExpiresIn      int64  `json:"expires_in"`
	}
	if err := a.decode(&body); err != nil {
		return SendResult{}, err
	}
	if body.Phone == "" || body.VerificationID == "" {
		return SendResult{}, &ProtocolError{StatusCode: a.status, Err: errors.New("no phone or verification_id")}
	}
	return SendResult{RequestID: body.ID, VerificationID: body.VerificationID, Phone: body.Phone,
		Status: body.Status, ExpiresIn: time.Duration(body.ExpiresIn) * time.Second,
		Replayed: a.header.Get("Idempotent-Replayed") == "true", IdempotencyKey: key}, nil
}

// VerifyRequest is the body of POST /v1/otp/verify.
type VerifyRequest struct {
	Phone    string `json:"phone"`
	Code     string `json:"code"` // as typed: spaces and "-" are ignored
	Region   string `json:"region,omitempty"`
	ClientIP string `json:"client_ip,omitempty"` // as for SendRequest
}

// VerifyResult is a 200: the code matched and is used up.
type VerifyResult struct {
	Status string // "approved"
	Phone  string // E.164
}

// Verify checks the code the person typed. A wrong code is *InvalidCode,
// nothing pending *NoPendingCode. It is tried again only when no connection
// to smsgw was made: after that a second try could spend a guess, or meet
// the code its first try approved gone (404), so a 503 or a lost answer is
// returned as *Unavailable for the person to try again.
func (c *Client) Verify(ctx context.Context, req VerifyRequest) (VerifyResult, error) {
	a, err := c.do(ctx, request{method: "POST", path: "/v1/otp/verify", body: req, safety: retryUnsent})
	if err != nil {
		return VerifyResult{}, err
	}
	var res VerifyResult
	var body struct {
		Status string `json:"status"`
		Phone  string `json:"phone"`
	}
	if err := a.decode(&body); err != nil {
		return res, err
	}
	if body.Status != "approved" {
		return res, &ProtocolError{StatusCode: a.status, Err: fmt.Errorf("status %q, not approved", body.Status)}
	}
	return VerifyResult{Status: body.Status, Phone: body.Phone}, nil
}

// Verification is what smsgw knows of one code's life; never the code.
type Verification struct {
	VerificationID string `json:"verification_id"`
	Phone          string `json:"phone"`
	// Status: "pending", "approved", "expired", "canceled" or "failed"
	// (wrong guesses used up).
	Status       string `json:"status"`
	Sends        int    `json:"sends"`
	AttemptsLeft int    `json:"attempts_left"`
	// DeliveryStatus is the last text's provider status ("queued", "sent",
	// "delivered", "undelivered", "failed"), "" while none is known.
	DeliveryStatus string    `json:"delivery_status"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	ExpiresAt      time.Time `json:"expires_at"`
}

// GetVerification looks a verification up by the id a send answered. Your
// key sees only those it started; another's is *NotFound like an unknown one.
func (c *Client) GetVerification(ctx context.Context, id string) (Verification, error) {
	a, err := c.do(ctx, request{method: "GET", path: "/v1/otp/verifications/" + url.PathEscape(id), safety: retryAnswered})
	if err != nil {
		return Verification{}, err
	}
	return decodeVerification(a)
}

// Cancel withdraws a pending code: verify then answers *NoPendingCode. It
// is idempotent: one canceled already (by an earlier call, or by this
// call's own first try whose answer was lost) is returned as it is; one
// that ended otherwise is *NotPending with its status. Tried again like a
// send.
func (c *Client) Cancel(ctx context.Context, id string) (Verification, error) {
	a, err := c.do(ctx, request{method: "POST", path: "/v1/otp/verifications/" + url.PathEscape(id) + "/cancel",
		safety: retryAnswered})
	var np *NotPending
	if errors.As(err, &np) && np.Status == "canceled" {
		return c.GetVerification(ctx, id)
	}
	if err != nil {
		return Verification{}, err
	}
	return decodeVerification(a)
}

func decodeVerification(a answer) (Verification, error) {
	var v Verification
	if err := a.decode(&v); err != nil {
		return v, err
	}
	if v.VerificationID == "" || v.Status == "" {
		return v, &ProtocolError{StatusCode: a.status, Err: errors.New("no verification_id or status")}
	}
	return v, nil
}
