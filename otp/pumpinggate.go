package otp

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// pumpingGate is the part of a send the pumping guard decides: it answers
// once from memory before anything touches Redis, reads the Admitter's
// reservation, and turns a refusal into a challenge when a verifier is
// configured.
type pumpingGate struct {
	s   *Service
	req SendRequest
	// exempt is an operator's allow override: no pumping rule, no ceiling.
	exempt bool
	// solved is set once the request's challenge token was accepted.
	solved bool
	res    PumpingReservation
	// refusal is the audit reason of the gate's refusal, set with it.
	refusal string
	// rule is the rule behind that refusal or challenge, for the limit
	// headers.
	rule *PumpingRefusal
}

// held answers from memory, before anything touches Redis.
func (g *pumpingGate) held(ctx context.Context, phone Phone) error {
	if g.exempt {
		return nil
	}
	r, held := g.s.Pumping.Held(phone, g.req.ClientIP)
	if !held {
		return nil
	}
	return g.refused(ctx, r)
}

// refusedSolved is a refusal that stands with the challenge solved (the
// money ceiling): a 429.
func (g *pumpingGate) refusedSolved(r PumpingRefusal) error {
	g.refusal, g.rule = r.Reason(), &r
	return pumpingRefused(r)
}

// refused is what a rule's refusal becomes: a 429, or with a verifier a
// challenge, which a solved one passes (the money ceiling excepted).
func (g *pumpingGate) refused(ctx context.Context, r PumpingRefusal) error {
	// A verifier without a provider offers no challenge.
	if g.s.Challenge.Widget().Provider == "" || r.Scope == "spend" {
		g.refusal, g.rule = r.Reason(), &r
		return pumpingRefused(r)
	}
	if g.solved {
		return nil
	}
	g.refusal, g.rule = "challenge_required:"+r.Reason(), &r
	if g.req.ChallengeToken == "" {
		return challengeRequired(g.s.Challenge.Widget(), r, "solve the challenge and send again with its challenge_token")
	}
	err := g.s.Challenge.Verify(ctx, g.req.ChallengeToken, g.req.ClientIP)
	var rejected *ChallengeRejected
	switch {
	case errors.As(err, &rejected):
		return challengeRequired(g.s.Challenge.Widget(), r, "the challenge_token was not accepted; solve a new challenge")
	case err != nil:
		g.refusal, g.rule = "", nil
		return unavailable("challenge", err)
	}
	g.refusal, g.rule, g.solved = "", nil, true
	return nil
}

// release gives back a reservation whose text was never sent.
func (g *pumpingGate) release(ctx context.Context) {
	if g.res.Ticket == nil {
		return
	}
	if err := g.s.Pumping.Release(ctx, g.res); err != nil {
		g.s.log.WarnContext(ctx, "pumping reservation not released; it stays counted", "err", err)
	}
}

// reason is the audit reason a sent text carries from the guard: what shadow
// mode would have refused, or the challenge it passed.
func (g *pumpingGate) reason() string {
	switch {
	case g.res.Shadow != nil:
		return "shadow:" + g.res.Shadow.Reason()
	case g.solved:
		return "challenge_passed"
	case g.exempt:
		return "override:allow"
	}
	return ""
}

// pumpingRefused is the client error for a pumping rule's refusal: a 429
// like a full window, naming the rule.
func pumpingRefused(r PumpingRefusal) *Error {
	secs := int64((r.RetryAfter + time.Second - 1) / time.Second)
	msg := fmt.Sprintf("texts to this %s are held back for suspected SMS pumping (%s); retry in %s (%d s)%s",
		pumpingNoun(r.Scope), r.Rule, waitInWords(secs), secs, liftHint(r.Scope, r.Rule))
	if r.Scope == "spend" {
		msg = fmt.Sprintf("texts are held back: the spend ceiling (%s) is reached; retry in %s (%d s)", r.Rule, waitInWords(secs), secs)
	}
	return &Error{
		Code:    ERateLimited,
		Message: msg,
		Fields: map[string]any{"scope": r.Scope, "rule": r.Rule, "window": WindowLabel(r.Window),
			"limit": r.Limit},
		RetryAfter: secs,
	}
}

func pumpingNoun(scope string) string {
	switch scope {
	case "range":
		return "number range"
	case "network":
		return "client network"
	default:
		return scope
	}
}

// challengeRequired asks the client to prove a person is sending.
func challengeRequired(w ChallengeWidget, r PumpingRefusal, hint string) *Error {
	return &Error{
		Code:    EChallengeRequired,
		Message: "this request needs a bot challenge: " + hint,
		Fields: map[string]any{"challenge": w, "scope": r.Scope, "rule": r.Rule,
			"window": WindowLabel(r.Window), "limit": r.Limit},
	}
}

// joinReasons joins two audit reasons, the second possibly empty.
func joinReasons(a, b string) string {
	if b == "" {
		return a
	}
	return a + "," + b
}
