package admission

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"smsgw/internal/testenv"
)

// toyPart is a Part over a toy script, for the composer alone.
type toyPart struct {
	script *Script
	call
	undo  []string
	reply any
	ran   bool
}

func (p *toyPart) Script() *Script         { return p.script }
func (p *toyPart) Undo() ([]string, []any) { return p.undo, nil }
func (p *toyPart) Read(v any) error        { p.reply, p.ran = v, true; return nil }

// The composer knows parts only as Parts: it runs them in order, hands
// each its own reply (a false reads as nil), stops at a part whose reply
// stops it and runs then the undo of each earlier part that has one.
func TestComposerStopsAndUndoes(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	uncount := &Script{Name: "uncount", Source: func() string { return "redis.call('DECR', KEYS[1]) return 1" }}
	toys := []*Script{
		{Name: "count", Source: func() string { return "redis.call('INCR', KEYS[1]) return {1}" }, Stops: "r[1] ~= 1", Undo: uncount},
		uncount,
		{Name: "gate", Source: func() string { return "return {tonumber(ARGV[1])}" }, Stops: "r[1] == 0 or (r[1] == 2 and not tagged)"},
		{Name: "last", Source: func() string { return "return false" }},
	}
	script := redis.NewScript(compose(toys))
	key := prefix + "composer:{x}"
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		gate   string
		tagged bool
		count  int64
		last   bool
	}{
		{"admitted", "1", false, 1, true},
		{"stopped, the count undone", "0", false, 1, false},
		{"asks again: stops alone", "2", false, 1, false},
		{"asks again: a tagged call goes on", "2", true, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			count := &toyPart{script: toys[0], call: call{keys: []string{key}}, undo: []string{key}}
			gate := &toyPart{script: toys[2], call: call{args: []any{tc.gate}}}
			last := &toyPart{script: toys[3], call: call{args: []any{"x"}}}
			var parts [4]Part
			for _, p := range []*toyPart{count, gate, last} {
				parts[p.script.at] = p
			}
			parts[uncount.at] = undoCall{script: uncount, keys: count.undo}
			keys, args := layout(parts[:], tc.tagged)
			v, err := script.Run(ctx, rdb, keys, args...).Result()
			if err != nil {
				t.Fatal(err)
			}
			r, err := split(v, len(toys))
			if err != nil {
				t.Fatal(err)
			}
			for _, err := range r.read(parts[:]) {
				if err != nil {
					t.Fatal(err)
				}
			}
			if !count.ran || !gate.ran || last.ran != tc.last || (tc.last && last.reply != nil) {
				t.Fatalf("ran count %v, gate %v, last %v (reply %v); want last %v with nil", count.ran, gate.ran, last.ran, last.reply, tc.last)
			}
			if n, _ := rdb.Get(ctx, key).Int64(); n != tc.count {
				t.Fatalf("count %d, want %d", n, tc.count)
			}
		})
	}
}
