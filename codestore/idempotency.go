package codestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/internal/luascript"
	"smsgw/otp"
)

// Idempotency is an otp.IdempotencyStore: one key per scope, holding the
// claiming request's ticket until the answer replaces it.
type Idempotency struct {
	rdb    redis.Cmdable
	prefix string
}

var (
	claimScript  = luascript.Script(luaFiles, "claim.lua")
	settleScript = luascript.Script(luaFiles, "settle.lua")
)

var _ otp.IdempotencyStore = (*Idempotency)(nil)

// NewIdempotency returns an Idempotency whose keys start with prefix.
func NewIdempotency(rdb redis.Cmdable, prefix string) *Idempotency {
	return &Idempotency{rdb: rdb, prefix: prefix}
}

// key hashes the scope: client-chosen keys never become Redis key names. A
// send's scope is kept under its number's per-phone hash tag
// (idem:{send:phone:<E.164>}:<sha256>, the tag of the limiter's rl:{…}
// keys), so on a Redis Cluster the claim runs in the same script as the
// number's windows and a duplicate in flight counts nothing there
// (admission.ClusterAdmitter). Replicas before issue 24 used
// idem:<sha256>: see docs/redis.md, "A rolling upgrade".
func (s *Idempotency) key(scope string) string {
	sum := sha256.Sum256([]byte(scope))
	if subject := otp.ScopeSubject(scope); subject != "" {
		return s.prefix + "idem:{" + subject + "}:" + hex.EncodeToString(sum[:])
	}
	return s.prefix + "idem:" + hex.EncodeToString(sum[:])
}

func (s *Idempotency) Claim(ctx context.Context, scope, ticket string, ttl time.Duration) (otp.Claim, []byte, error) {
	res, err := claimScript.Run(ctx, s.rdb, []string{s.key(scope)}, claimArgs{ticket, ttl}.argv()...).Slice()
	if err != nil {
		return 0, nil, fmt.Errorf("idempotency: claim: %w", err)
	}
	claim, answer, err := parseClaimReply(res)
	if err != nil {
		return 0, nil, fmt.Errorf("idempotency: claim: %w", err)
	}
	return claim, answer, nil
}

func (s *Idempotency) Settle(ctx context.Context, scope, ticket string, answer []byte, ttl time.Duration) error {
	if err := settleScript.Run(ctx, s.rdb, []string{s.key(scope)}, settleArgs{ticket, answer, ttl}.argv()...).Err(); err != nil {
		return fmt.Errorf("idempotency: settle: %w", err)
	}
	return nil
}
