package codestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/internal/luascript"
	"smsgw/otp"
)

// On a Redis Cluster a keyed send claims in the same round as it counts on
// its other slots, so a duplicate in flight counts there until it gives
// back, and may refuse the request it duplicates. claim.lua counts, next
// to the scope, the requests that found the claim held; each takes itself
// off once it gave back (GaveBack), so the holder refused meanwhile knows
// when to ask again (Duplicates).

var gaveBackScript = luascript.Script(luaFiles, "gaveback.lua")

// duplicatesKey shares the scope key's hash tag.
func (s *Idempotency) duplicatesKey(scope string) string { return s.key(scope) + ":dup" }

// CountingClaimCall is ClaimCall that counts a request finding the claim
// held. For a send's scope only (otp.ScopeSubject): both keys must share a
// slot; any other scope gets ClaimCall's.
func (s *Idempotency) CountingClaimCall(scope, ticket string, ttl time.Duration) (keys []string, args []any) {
	keys, args = s.ClaimCall(scope, ticket, ttl)
	if otp.ScopeSubject(scope) != "" {
		keys = append(keys, s.duplicatesKey(scope))
	}
	return keys, args
}

// GaveBack takes a request counted by CountingClaimCall off the count.
func (s *Idempotency) GaveBack(ctx context.Context, scope string) error {
	if err := gaveBackScript.Run(ctx, s.rdb, []string{s.duplicatesKey(scope)}).Err(); err != nil {
		return fmt.Errorf("idempotency: gave back: %w", err)
	}
	return nil
}

// Duplicates is how many requests found scope's claim held and have not
// given back yet.
func (s *Idempotency) Duplicates(ctx context.Context, scope string) (int64, error) {
	n, err := s.rdb.Get(ctx, s.duplicatesKey(scope)).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("idempotency: duplicates: %w", err)
	}
	return n, nil
}
