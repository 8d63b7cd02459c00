package luascript

import (
	"context"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/internal/testenv"
)

var files = fstest.MapFS{"now.lua": {Data: []byte("return clock(tonumber(ARGV[2]))")}}

// clock answers ARGV[1] when given, else Redis TIME in the unit asked, also
// wrapped as a local function the way package admission composes scripts.
func TestClock(t *testing.T) {
	rdb, _ := testenv.Redis(t)
	ctx := context.Background()
	wrapped := redis.NewScript("local function f(KEYS, ARGV)\n" + Source(files, "now.lua") + "\nend\nreturn f(KEYS, {ARGV[2], ARGV[1]})")
	for name, run := range map[string]func(args ...any) (int64, error){
		"alone": func(args ...any) (int64, error) { return Script(files, "now.lua").Run(ctx, rdb, nil, args...).Int64() },
		"wrapped": func(args ...any) (int64, error) {
			return wrapped.Run(ctx, rdb, nil, args[1], args[0]).Int64() // the wrapper swaps them back
		},
	} {
		t.Run(name, func(t *testing.T) {
			if got, err := run("42", 1000); err != nil || got != 42 {
				t.Fatalf("clock with ARGV[1] = 42: %d, %v", got, err)
			}
			for _, per := range []int64{1000, 1000000} {
				before := time.Now()
				got, err := run("", per)
				after := time.Now()
				if err != nil {
					t.Fatal(err)
				}
				us := 1e6 / per // microseconds in a unit
				lo, hi := before.Add(-time.Second).UnixMicro()/us, after.Add(time.Second).UnixMicro()/us
				if got < lo || got > hi {
					t.Fatalf("clock(%d) = %d, want within a second of now (%d..%d)", per, got, lo, hi)
				}
			}
		})
	}
}

func TestMissingFilePanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "gone.lua") {
			t.Fatalf("recovered %v, want a panic naming the file", r)
		}
	}()
	Source(files, "gone.lua")
}
