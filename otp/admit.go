package otp

import (
	"context"
	"net/netip"
	"time"
)

// SendAdmitter does, in one atomic step, everything a send needs from its
// store before the text: it claims the idempotency scope, decides every
// window of every subject, decides and reserves the pumping budgets, and
// issues (or renews) the code. It stops at the first refusal and takes back
// what the earlier parts counted, in the same step, so a refused send holds
// nothing. On one Redis primary that is one script call: one round trip
// instead of four.
//
// The send flow always asks it; whether that is one script call, one per
// Cluster slot, or several regions' calls is the admitter's business. It
// must agree with the parts it stands in for: what it counts, Limiter.Refund
// and PumpingGuard.Release take back, and what it stores, CodeStore and
// IdempotencyStore read.
type SendAdmitter interface {
	Admit(ctx context.Context, a Admission) (Admitted, error)
}

// Admission is what a send asks of its store before the text.
type Admission struct {
	// Ticket is what the windows record (SendRequest.Ticket).
	Ticket   string
	Phone    Phone
	ClientIP netip.Addr
	// Scope, when set, is the idempotency scope to claim first, for
	// ClaimTTL; nothing else is done unless it is claimed.
	Scope    string
	ClaimTTL time.Duration
	Subjects []Subject
	// Pumping asks the pumping guard (false: an operator's override exempts
	// the send); Bypass decides only the money ceiling (a solved challenge).
	Pumping, Bypass bool
	// Code is stored unless a code is pending, for CodeTTL.
	Code    StoredCode
	CodeTTL time.Duration
}

// Admitted is what each part of an Admission answered, as far as it got.
type Admitted struct {
	// Claim is Claimed when Scope was empty or is now this request's;
	// with ClaimDone, Prior is the stored answer. Nothing else is held
	// unless Claimed (on a Cluster the other slots ran in the same round
	// and were given back; a code they issued stays pending).
	Claim Claim
	Prior []byte
	// Decision is the windows' answer when Limited (they were asked).
	Decision Decision
	Limited  bool
	// Pumping is the guard's reservation; when Refused is set the windows
	// were given back and nothing is counted.
	Pumping PumpingReservation
	// Issued is set when the code part ran: Pending is then the pending
	// code's sealed form (its expiry renewed, its attempts kept), or nil
	// when Code was stored.
	Issued  bool
	Pending []byte
}
