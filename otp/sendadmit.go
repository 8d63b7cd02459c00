package otp

import (
	"context"
	"fmt"
)

// admitted is a send that holds what it needs before the text: quota in the
// windows of its subjects, the pumping guard's reservation (in its gate)
// and the code to text.
type admitted struct {
	subjects []Subject
	code     string
	issued   issuedCode
}

func idempotencyScope(phone Phone, req SendRequest) string {
	if req.IdempotencyKey == "" {
		return ""
	}
	return SendScope(phone.E164, req.IdempotencyKey)
}

// claimAlone claims scope on its own (waiting while another request holds
// it), or answers with the stored reply.
func (s *Service) claimAlone(ctx context.Context, scope, ticket string, res *SendResult, claimed *string) (replayed bool, err error) {
	prior, err := s.claim(ctx, scope, ticket)
	if err != nil {
		return false, err
	}
	if prior != nil {
		*res, err = replay(*res, prior)
		return true, err
	}
	*claimed = scope
	return false, nil
}

// held answers a send from the memory of held subjects, which costs no
// Redis call: the pumping guard's holds, then the Admitter's remembered
// refusals. A held send with an Idempotency-Key still answers its replay
// first: it claims on its own. done says it was answered (res filled, err
// its error; on a replay res.Replayed); else admit asks the Admitter.
// Send asks before it makes the context a text is sent under, which a
// refusal from memory never needs.
func (s *Service) held(ctx context.Context, req SendRequest, phone Phone, gate *pumpingGate,
	res *SendResult, claimed *string) (done bool, err error) {
	scope := idempotencyScope(phone, req)
	if err := gate.held(ctx, phone); err != nil {
		if scope != "" {
			if replayed, cerr := s.claimAlone(ctx, scope, req.Ticket, res, claimed); replayed || cerr != nil {
				return true, cerr
			}
		}
		res.Reason, res.Refusal = gate.refusal, gate.rule
		return true, err
	}
	if m, ok := s.Admitter.(RefusalMemory); ok && scope == "" {
		// The Admitter would answer the same from the same memory, after
		// the code it did not need. (With a scope it claims first.)
		if d, held := m.Remembered(s.requestSubjects(phone, req)); held {
			err, reason := s.heldErrors.rateLimited(d)
			res.Decision, res.Limited, res.Reason = d, true, reason
			return true, err
		}
	}
	return false, nil
}

// admit asks the Admitter for everything in one step, once held found no
// answer in memory. On a refusal or an error it fills res and holds nothing
// (claimed, the idempotency scope it took, excepted: Send settles it); on a
// replay it sets res.Replayed.
func (s *Service) admit(ctx, sendCtx context.Context, req SendRequest, phone Phone, gate *pumpingGate,
	res *SendResult, claimed *string) (admitted, error) {
	scope := idempotencyScope(phone, req)
	subjects := s.requestSubjects(phone, req)
	code, fresh, err := s.newCode(phone.E164)
	if err != nil {
		return admitted{}, err
	}
	adm := Admission{Ticket: req.Ticket, Phone: phone, ClientIP: req.ClientIP, Scope: scope,
		ClaimTTL: s.claimHold(), Subjects: subjects, Pumping: !gate.exempt, Bypass: gate.solved,
		Code: fresh, CodeTTL: s.cfg.CodeTTL}
	for {
		a, err := s.Admitter.Admit(ctx, adm)
		if adm.Scope != "" {
			switch {
			case err != nil:
				*claimed = adm.Scope // it may have been claimed: give it up
			case a.Claim == ClaimBusy:
				// Another request holds it: wait for its answer.
				if replayed, cerr := s.claimAlone(ctx, adm.Scope, req.Ticket, res, claimed); replayed || cerr != nil {
					return admitted{}, cerr
				}
				adm.Scope = ""
				continue
			case a.Claim == ClaimDone:
				*res, err = replay(*res, a.Prior)
				return admitted{}, err
			case a.Claim == Claimed:
				*claimed = adm.Scope
			}
		}
		if err != nil {
			return admitted{}, unavailable("redis", err)
		}
		if a.Claim != Claimed {
			return admitted{}, unavailable("redis", fmt.Errorf("unexpected claim state %d", a.Claim))
		}
		adm.Scope = ""
		res.Decision, res.Limited = a.Decision, a.Limited
		if a.Limited && !a.Decision.Allowed {
			res.Reason = a.Decision.Reason()
			return admitted{}, RateLimitedError(a.Decision)
		}
		if r := a.Pumping.Refused; r != nil {
			// Refused: the windows were given back in the same step.
			if adm.Bypass {
				err := gate.refusedSolved(*r)
				res.Reason, res.Refusal = gate.refusal, gate.rule
				return admitted{}, err
			}
			if err := gate.refused(ctx, *r); err != nil {
				res.Reason, res.Refusal = gate.refusal, gate.rule
				return admitted{}, err
			}
			// The challenge was solved just now: admit again without the
			// rules.
			adm.Bypass = true
			continue
		}
		gate.res = a.Pumping
		if !a.Issued {
			s.refund(sendCtx, req.Ticket, subjects)
			gate.release(sendCtx)
			return admitted{}, unavailable("redis", fmt.Errorf("the code was not issued"))
		}
		code, issued, err := s.adopt(sendCtx, phone.E164, code, fresh, a.Pending)
		if err != nil {
			s.refund(sendCtx, req.Ticket, subjects)
			gate.release(sendCtx)
			return admitted{}, err
		}
		return admitted{subjects: subjects, code: code, issued: issued}, nil
	}
}
