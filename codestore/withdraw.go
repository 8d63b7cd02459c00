package codestore

import (
	"context"
	"fmt"

	"smsgw/internal/luascript"
	"smsgw/otp"
)

// The protocol of withdraw.lua, which deletes the pending code only while its
// sealed form starts with a verification's prefix. KEYS[1] is the phone's
// code hash (codeField*); ARGV is withdrawArgs.argv(): the prefix. The reply
// is 1 when it deleted the code, 0 when the code was not that verification's
// (or none was pending).
type withdrawArgs struct{ prefix []byte }

func (a withdrawArgs) argv() []any { return []any{a.prefix} }

var withdrawScript = luascript.Script(luaFiles, "withdraw.lua")

var _ otp.CodeWithdrawer = (*Store)(nil)

// Withdraw deletes phone's pending code if it is still the one whose sealed
// form starts with prefix (a verification's: a canceled verification), and
// reports whether it did.
func (s *Store) Withdraw(ctx context.Context, phone string, prefix []byte) (bool, error) {
	n, err := withdrawScript.Run(ctx, s.rdb, []string{s.key(phone)}, withdrawArgs{prefix}.argv()...).Int()
	if err != nil {
		return false, fmt.Errorf("codes: withdraw: %w", err)
	}
	return n == 1, nil
}
