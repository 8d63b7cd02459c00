package codestore

// The protocol of discard.lua, which deletes the pending code only if it is
// still the one with this MAC. KEYS[1] is the phone's code hash
// (codeField*); ARGV is discardArgs.argv(): the MAC. The reply, 1 deleted or
// 0 not, is not read: either way that code is not pending.
type discardArgs struct{ mac []byte }

func (a discardArgs) argv() []any { return []any{a.mac} }
