package codestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"smsgw/internal/hashslot"
	"smsgw/internal/testenv"
	"smsgw/otp"
	"smsgw/ratelimit"
)

// A send's scope is kept under its number's per-phone hash tag, the one
// the limiter's windows use, so a Cluster slot holds both; the client's
// key never appears in clear; a scope of another form keeps the old name.
func TestIdempotencyKeyLayout(t *testing.T) {
	const prefix = "smsgw:"
	s := NewIdempotency(nil, prefix)
	tests := []struct {
		name, scope, want string
	}{
		{"a send's scope", otp.SendScope("+447400123456", "signup-42"), "smsgw:idem:{send:phone:+447400123456}:"},
		{"a key with braces", otp.SendScope("+447400123456", "{x}"), "smsgw:idem:{send:phone:+447400123456}:"},
		{"another form", "verify\x00abc", "smsgw:idem:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := s.key(tt.scope)
			sum := sha256.Sum256([]byte(tt.scope))
			if key != tt.want+hex.EncodeToString(sum[:]) {
				t.Fatalf("key %q, want %q + sha256(scope)", key, tt.want)
			}
			if _, clientKey, ok := strings.Cut(strings.TrimPrefix(tt.scope, "send\x00"), "\x00"); ok && strings.Contains(key, clientKey) {
				t.Fatalf("key %q holds the client's key %q in clear", key, clientKey)
			}
		})
	}
	t.Run("the slot of the number's windows", func(t *testing.T) {
		scope := otp.SendScope("+447400123456", "signup-42")
		w, err := ratelimit.New(nil, prefix, ratelimit.Options{}).Windows("t1", []otp.Subject{{Scope: "phone",
			Key: otp.ScopeSubject(scope), Rules: []otp.Rule{{Window: time.Minute, Max: 1}}}})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := hashslot.Of(s.key(scope)), hashslot.Of(w.Keys[0]); got != want {
			t.Fatalf("the claim is on slot %d, the number's windows (%s) on %d", got, w.Keys[0], want)
		}
	})
}

// A request claims again what its own ticket holds (a try that crossed,
// then asked in turn); another request finds it held, then answered.
func TestClaimByTheSameTicket(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	s := NewIdempotency(rdb, prefix)
	ctx := context.Background()
	scope := otp.SendScope("+447400123456", "k1")
	for _, tc := range []struct {
		name   string
		ticket string
		settle []byte // the answer stored first, if any
		want   otp.Claim
	}{
		{"first", "t1", nil, otp.Claimed},
		{"the same request again", "t1", nil, otp.Claimed},
		{"another request", "t2", nil, otp.ClaimBusy},
		{"once answered, the same request", "t1", []byte("{}"), otp.ClaimDone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.settle != nil {
				if err := s.Settle(ctx, scope, "t1", tc.settle, time.Minute); err != nil {
					t.Fatal(err)
				}
			}
			if c, _, err := s.Claim(ctx, scope, tc.ticket, time.Minute); err != nil || c != tc.want {
				t.Fatalf("Claim by %s: %v, %v; want %v", tc.ticket, c, err, tc.want)
			}
		})
	}
}
