package codestore

import "time"

// The protocol of settle.lua, which settles an idempotency claim (see
// claim.go for the key's values), only while the ticket's claim holds.
//
// KEYS[1] is the scope's key. ARGV is settleArgs.argv(): the ticket, the
// answer (empty gives the claim up), how long the answer is kept in
// milliseconds. The reply (1 settled, 0 the claim was gone) is not read.
type settleArgs struct {
	ticket string
	answer []byte
	ttl    time.Duration
}

func (a settleArgs) argv() []any { return []any{a.ticket, a.answer, ms(a.ttl)} }
