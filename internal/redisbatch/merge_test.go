package redisbatch_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/internal/redisbatch"
	"smsgw/internal/redistopo"
)

// add adds ARGV[1] to KEYS[1] and answers the sum; addMany runs several adds
// in one call, as a Merge's script must: KEYS one a call, ARGV one a call,
// a list of replies, each call's error its own.
var (
	add     = redis.NewScript(`return redis.call('INCRBY', KEYS[1], ARGV[1])`)
	addMany = redis.NewScript(`
local replies = {}
for i = 1, #KEYS do
  local ok, r = pcall(redis.call, 'INCRBY', KEYS[i], ARGV[i])
  if not ok and type(r) ~= 'table' then r = {err = tostring(r)} end
  replies[i] = r
end
return replies`)
)

func init() {
	redisbatch.Mergeable(add, redisbatch.Merge{
		Script: addMany,
		Same:   func(a, b redisbatch.Call) bool { return len(a.Keys) == 1 && len(b.Keys) == 1 },
		Args: func(calls []redisbatch.Call) ([]string, []any) {
			keys, args := make([]string, len(calls)), make([]any, len(calls))
			for i, c := range calls {
				keys[i], args[i] = c.Keys[0], c.Args[0]
			}
			return keys, args
		},
	})
}

// evalshaCalls is how many EVALSHA Redis has run.
func evalshaCalls(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	s, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(s, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:calls="); ok {
			n := 0
			for _, ch := range rest {
				if ch < '0' || ch > '9' {
					break
				}
				n = n*10 + int(ch-'0')
			}
			return n
		}
	}
	return 0
}

// Calls of a mergeable script in one pipeline go as one merged call, each
// getting its own reply or its own error, and a merged script lost to a
// SCRIPT FLUSH is loaded again.
func TestMergedCallsEachGetTheirOwnReply(t *testing.T) {
	node := redistopo.StartSingle(t)
	rdb := node.Client()
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.HSet(ctx, "h", "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	b := redisbatch.New(rdb, redisbatch.Options{Timeout: 10 * time.Second})
	for round := range 2 {
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		before := evalshaCalls(t, rdb)
		cmds := b.RunAll(ctx, []redisbatch.Call{
			{Script: add, Keys: []string{"a"}, Args: []any{1}},
			{Script: add, Keys: []string{"h"}, Args: []any{1}}, // WRONGTYPE: this call's error only
			{Script: incr, Keys: []string{"n"}},                // not mergeable: sent as itself
			{Script: add, Keys: []string{"a"}, Args: []any{10}},
		})
		if got, err := cmds[0].Int64(); err != nil || got != int64(11*round+1) {
			t.Errorf("round %d: first add = %d, %v; want %d", round, got, err, 11*round+1)
		}
		if err := cmds[1].Err(); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Errorf("round %d: add to a hash = %v, want its WRONGTYPE error", round, err)
		}
		if got, err := cmds[2].Int64(); err != nil || got != int64(round+1) {
			t.Errorf("round %d: incr = %d, %v; want %d", round, got, err, round+1)
		}
		if got, err := cmds[3].Int64(); err != nil || got != int64(11*round+11) {
			t.Errorf("round %d: second add = %d, %v; want %d (after the first)", round, got, err, 11*round+11)
		}
		// Two EVALSHA (the merged adds, incr) and, after the flush, two
		// again once both scripts are loaded.
		if n := evalshaCalls(t, rdb) - before; n != 4 {
			t.Errorf("round %d: %d EVALSHA for four calls (three merged), want 4: 2 refused NOSCRIPT, 2 sent again", round, n)
		}
	}
}
