// Package codestore implements otp.CodeStore on Redis: one hash per phone
// holding the code's MAC, its sealed form and the wrong attempts, expiring
// with the code.
package codestore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/internal/luascript"
	"smsgw/internal/redisbatch"
	"smsgw/otp"
)

// Store is an otp.CodeStore.
type Store struct {
	rdb     redis.Cmdable
	prefix  string
	scripts Scripts
}

var _ otp.CodeStore = (*Store)(nil)

// Scripts runs Redis scripts (redisbatch.Scripts, one interface for every
// package that runs them).
type Scripts = redisbatch.Scripts

// luaFiles are the package's scripts, each loaded after the prelude every
// script shares (package luascript).
//
//go:embed *.lua
var luaFiles embed.FS

var (
	issueScript   = luascript.Script(luaFiles, "issue.lua")
	checkScript   = luascript.Script(luaFiles, "check.lua")
	discardScript = luascript.Script(luaFiles, "discard.lua")
)

// New returns a Store whose keys start with prefix (e.g. "smsgw:"). Issue and
// Check go through scripts; nil gives it a batcher of its own.
func New(rdb redis.Cmdable, prefix string, scripts Scripts) *Store {
	if scripts == nil {
		scripts = redisbatch.New(rdb, redisbatch.Options{})
	}
	return &Store{rdb: rdb, prefix: prefix, scripts: scripts}
}

func (s *Store) key(phone string) string { return s.prefix + "otp:" + phone }

func (s *Store) Issue(ctx context.Context, phone string, c otp.StoredCode, ttl time.Duration) ([]byte, error) {
	sealed, err := parseIssueReply(s.scripts.Run(ctx, issueScript, []string{s.key(phone)}, issueArgs{c, ttl}.argv()...))
	if err != nil {
		return nil, fmt.Errorf("codes: issue: %w", err)
	}
	return sealed, nil
}

func (s *Store) Replace(ctx context.Context, phone string, c otp.StoredCode, ttl time.Duration) error {
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, s.key(phone), codeFieldMAC, c.MAC, codeFieldSealed, c.Sealed)
		p.PExpire(ctx, s.key(phone), ttl)
		return nil
	})
	if err != nil {
		return fmt.Errorf("codes: replace: %w", err)
	}
	return nil
}

func (s *Store) Discard(ctx context.Context, phone string, mac []byte) error {
	if err := discardScript.Run(ctx, s.rdb, []string{s.key(phone)}, discardArgs{mac}.argv()...).Err(); err != nil {
		return fmt.Errorf("codes: discard: %w", err)
	}
	return nil
}

func (s *Store) Check(ctx context.Context, phone string, mac []byte, maxAttempts int) (otp.CodeCheck, int, error) {
	v, err := s.scripts.Run(ctx, checkScript, []string{s.key(phone)}, checkArgs{mac, maxAttempts}.argv()...).Result()
	if err != nil {
		return otp.CodeNone, 0, fmt.Errorf("codes: check: %w", err)
	}
	status, left, err := parseCheckReply(v)
	if err != nil {
		return otp.CodeNone, 0, fmt.Errorf("codes: check: %w", err)
	}
	return status, left, nil
}

func (s *Store) Pending(ctx context.Context, phone string) (otp.PendingCode, bool, error) {
	var attempts *redis.StringCmd
	var ttl *redis.DurationCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		attempts = p.HGet(ctx, s.key(phone), codeFieldAttempts)
		ttl = p.PTTL(ctx, s.key(phone))
		return nil
	})
	if errors.Is(err, redis.Nil) {
		return otp.PendingCode{}, false, nil
	}
	if err != nil {
		return otp.PendingCode{}, false, fmt.Errorf("codes: pending: %w", err)
	}
	n, err := strconv.Atoi(attempts.Val())
	if err != nil || ttl.Val() <= 0 {
		return otp.PendingCode{}, false, nil
	}
	return otp.PendingCode{Attempts: n, ExpiresIn: ttl.Val()}, true, nil
}

// Cancel deletes phone's pending code whatever it is (the operators'
// console), and reports whether there was one.
func (s *Store) Cancel(ctx context.Context, phone string) (bool, error) {
	n, err := s.rdb.Del(ctx, s.key(phone)).Result()
	if err != nil {
		return false, fmt.Errorf("codes: cancel: %w", err)
	}
	return n > 0, nil
}
