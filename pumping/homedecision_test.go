package pumping

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"
)

// homeDecisionSignal is where decideArgs.argv puts the caller's signal.
const homeDecisionSignal = 12

// sameRedis runs scripts on rdb: a "home region" that is the test Redis.
type sameRedis struct{ rdb redis.UniversalClient }

func (s sameRedis) Run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	return script.Run(ctx, s.rdb, keys, args...)
}

// silentCaller runs scripts on rdb and answers every decide.lua call as if
// it had told no caller signal (-1), which decide.lua never does for a
// call that counts a network level that is a sign: the one way to reach
// HomeDecision's unknown signal.
type silentCaller struct{ rdb redis.UniversalClient }

func (s silentCaller) Run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	cmd := script.Run(ctx, s.rdb, keys, args...)
	v, ok := cmd.Val().([]any)
	if cmd.Err() != nil || !ok || len(v) != decideReplyLen {
		return cmd
	}
	v = slices.Clone(v)
	v[decideReplySignal] = int64(-1)
	out := redis.NewCmd(ctx)
	out.SetVal(v)
	return out
}

// homeGuard is f's guard for numbers homed in another region (every
// country), that region being the test Redis too, with scripts running
// this region's calls.
func (f *fixture) homeGuard(t *testing.T, edit func(*Config), cluster bool, scripts Scripts) *Guard {
	t.Helper()
	g := f.guard(t, edit, cluster)
	g.scripts = scripts
	g.home = func(string) Scripts { return sameRedis{f.rdb} }
	return g
}

// runHome runs d's call as the home's composed script would, and reads
// the reply into the reservation.
func runHome(t *testing.T, ctx context.Context, f *fixture, d Decision) []any {
	t.Helper()
	if d.Keys == nil {
		return nil
	}
	v, err := redis.NewScript(DecideLua()).Run(ctx, f.rdb, d.Keys, d.Args...).Slice()
	if err != nil {
		t.Fatalf("the home's call: %v", err)
	}
	return v
}

// The configurations a deployment runs never leave a send homed elsewhere
// without a caller signal for the home: HomeDecision is always one call
// there, which never asks again.
func TestHomeDecisionIsAlwaysOneCall(t *testing.T) {
	ctx := context.Background()
	for i, tc := range []struct {
		name string
		edit func(*Config)
	}{
		{"enforce", func(*Config) {}},
		{"shadow", func(c *Config) { c.Mode = ModeShadow }},
		{"off, with a spend ceiling", func(c *Config) { c.Mode, c.Spend = ModeOff, Spend{Default: 0.05, Day: 1000} }},
		{"no network sign", func(c *Config) {
			for _, r := range []string{RuleNet16, RuleNet24, RuleNet48, RuleNet6x32} {
				delete(c.Floors, r)
			}
		}},
		{"networks only", func(c *Config) { c.Floors = map[string]int{RuleNet24: 5, RuleNet16: 5} }},
		{"a spend ceiling", func(c *Config) { c.Spend = Spend{Default: 0.05, Hour: 10, Day: 1000} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachLayout(t, func(t *testing.T, f *fixture, cluster bool) {
				g := f.homeGuard(t, tc.edit, cluster, sameRedis{f.rdb})
				for j, from := range []string{fmt.Sprintf("203.0.113.%d", 10+i), fmt.Sprintf("2001:db8:%x::1", 10+i)} {
					for _, bypass := range []bool{false, true} {
						p := phone(t, fmt.Sprintf("+1415555%02d%02d", 50+i, j))
						d, err := g.HomeDecision(ctx, p, ip(from), bypass)
						if err != nil {
							t.Fatalf("HomeDecision from %s, bypass %v: %v", from, bypass, err)
						}
						if d.Keys != nil && d.Args[homeDecisionSignal] == "?" {
							t.Fatalf("from %s, bypass %v: the home is told signal %q", from, bypass, "?")
						}
						if v := runHome(t, ctx, f, d); v != nil && decideVerdict(v[decideReplyVerdict].(int64)) == verdictAskAgain {
							t.Fatalf("from %s, bypass %v: the home asks again: %v", from, bypass, v)
						}
					}
				}
			})
		})
	}
}

// A caller signal still unknown once this region decided (its networks'
// call told none) goes to the home as "0", no sign, as Reserve asks again:
// the send is decided at home in one call, and what was counted here is
// kept for Read.
func TestHomeDecisionWithNoCallerSignalTellsNone(t *testing.T) {
	ctx := context.Background()
	eachLayout(t, func(t *testing.T, f *fixture, cluster bool) {
		g := f.homeGuard(t, nil, cluster, silentCaller{f.rdb})
		d, err := g.HomeDecision(ctx, phone(t, "+14155550199"), ip("198.51.100.7"), false)
		if errors.Is(err, ErrSeveralCalls) || err != nil {
			t.Fatalf("HomeDecision: %v; want one call at home", err)
		}
		if len(d.here) == 0 || d.RefusedHere() {
			t.Fatalf("decided here: %+v; want the caller's networks counted", d.here)
		}
		if d.Keys == nil || d.Args[homeDecisionSignal] != "0" {
			t.Fatalf("the home's call: keys %v, args %v; want the signal %q", d.Keys, d.Args, "0")
		}
		v := runHome(t, ctx, f, d)
		if got := decideVerdict(v[decideReplyVerdict].(int64)); got != verdictCounted {
			t.Fatalf("the home's verdict %d, want counted", got)
		}
		r, err := d.Read(ctx, v)
		if err != nil || r.Refused != nil || r.Ticket == nil {
			t.Fatalf("Read: %+v, %v; want a reservation", r, err)
		}
		if err := g.Release(ctx, r); err != nil {
			t.Fatal(err)
		}
	})
}
