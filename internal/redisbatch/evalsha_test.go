package redisbatch

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestEvalShaIsGoRedis: evalSha queues the command script.EvalSha queues,
// argument for argument (each of the same Go type and value), with the
// same first key, for no key or many, no argument, one (a slice go-redis
// flattens) or several; and the keys it boxes are strings in every way a
// reader of the arguments looks at them, whatever the caller's slice
// becomes after.
func TestEvalShaIsGoRedis(t *testing.T) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer rdb.Close()
	script := redis.NewScript("return 1")
	cases := []struct {
		keys []string
		args []any
	}{
		{nil, nil},
		{[]string{"a"}, nil},
		{nil, []any{1, "x"}},
		{[]string{"{t}k1", "{t}k2", ""}, []any{"x", 2, int64(3), 1.5, []byte("b"), true}},
		{[]string{"k"}, []any{[]string{"flattened", "alone"}}},
		{[]string{"k"}, []any{"one"}},
		{make([]string, 300), []any{"a", "b"}},
	}
	for i := range cases[len(cases)-1].keys {
		cases[len(cases)-1].keys[i] = fmt.Sprintf("key:%d", i)
	}
	for n, c := range cases {
		want := script.EvalSha(ctx, rdb.Pipeline(), c.keys, c.args...)
		keys := append([]string(nil), c.keys...)
		got := evalSha(ctx, rdb.Pipeline(), script, keys, c.args)
		for i := range keys {
			keys[i] = "changed"
		}
		if !reflect.DeepEqual(got.Args(), want.Args()) {
			t.Fatalf("case %d: args %#v, want %#v", n, got.Args(), want.Args())
		}
		for i, a := range got.Args() {
			if fmt.Sprint(a) != fmt.Sprint(want.Args()[i]) {
				t.Fatalf("case %d: arg %d %v, want %v", n, i, a, want.Args()[i])
			}
			if s, ok := a.(string); ok && (s != want.Args()[i].(string) || a != want.Args()[i]) {
				t.Fatalf("case %d: arg %d as a string %q", n, i, s)
			}
		}
		if !reflect.DeepEqual(got, want) { // the first key's position too
			t.Fatalf("case %d: command %#v, want %#v", n, got, want)
		}
	}
}

// TestEvalShaBoxesNoKey: a call's keys cost one allocation together.
func TestEvalShaBoxesNoKey(t *testing.T) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	script := redis.NewScript("return 1")
	keys := make([]string, 21)
	for i := range keys {
		keys[i] = fmt.Sprintf("key:%d", i)
	}
	args := []any{"a", "b", "c"}
	pipe := rdb.Pipeline()
	allocs := testing.AllocsPerRun(100, func() {
		pipe.Discard()
		evalSha(ctx, pipe, script, keys, args)
	})
	if allocs > 3 {
		t.Fatalf("%v allocations a call of 21 keys, want 3 (the command, its arguments, the keys)", allocs)
	}
}
