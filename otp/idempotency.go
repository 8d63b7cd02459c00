package otp

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// claim takes the idempotency scope for this request, or returns the answer
// stored in it. While another request holds it, claim waits for that one to
// answer (at most as long as a send may take).
func (s *Service) claim(ctx context.Context, scope, ticket string) ([]byte, error) {
	hold := s.claimHold()
	deadline := time.Now().Add(hold)
	for {
		state, answer, err := s.Idempotency.Claim(ctx, scope, ticket, hold)
		if err != nil {
			return nil, unavailable("idempotency", err)
		}
		switch state {
		case Claimed:
			return nil, nil
		case ClaimDone:
			return answer, nil
		}
		if time.Now().After(deadline) {
			return nil, Errorf(ERequestInProgress, "a request with this Idempotency-Key is still in progress; retry later")
		}
		select {
		case <-ctx.Done():
			return nil, unavailable("idempotency", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// claimHold is how long a claim is kept: as long as a send may take.
func (s *Service) claimHold() time.Duration { return s.cfg.SendTimeout + 5*time.Second }

// storedSend is what an idempotency scope keeps of an accepted send.
type storedSend struct {
	RequestID string        `json:"request_id"`
	Provider  string        `json:"provider"`
	MessageID string        `json:"message_id"`
	ExpiresIn time.Duration `json:"expires_in"`
	Decision  Decision      `json:"decision"`
	// Verification is the send's verification id.
	Verification string `json:"verification_id,omitempty"`
}

// settle stores an accepted send's answer; any other outcome lets a retry
// with the same key run afresh (a refused or failed send texted nobody).
func (s *Service) settle(ctx context.Context, scope, ticket string, res SendResult, err error) {
	ctx = context.WithoutCancel(ctx)
	var answer []byte
	if err == nil {
		answer, _ = json.Marshal(storedSend{RequestID: res.RequestID, Provider: res.Receipt.Provider,
			MessageID: res.Receipt.MessageID, ExpiresIn: res.ExpiresIn, Decision: res.Decision,
			Verification: res.VerificationID})
	}
	if serr := s.Idempotency.Settle(ctx, scope, ticket, answer, s.cfg.CodeTTL); serr != nil {
		s.log.WarnContext(ctx, "idempotency answer not stored", "err", serr)
	}
}

func replay(res SendResult, prior []byte) (SendResult, error) {
	var st storedSend
	if err := json.Unmarshal(prior, &st); err != nil {
		return res, fmt.Errorf("idempotency: stored answer: %w", err)
	}
	res.RequestID, res.Receipt = st.RequestID, Receipt{Provider: st.Provider, MessageID: st.MessageID}
	res.ExpiresIn, res.Decision, res.Limited = st.ExpiresIn, st.Decision, true
	res.VerificationID = st.Verification
	res.Replayed, res.Reason = true, "idempotent_replay"
	return res, nil
}
