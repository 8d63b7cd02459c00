package admission

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/codestore"
	"smsgw/internal/redisbatch"
	"smsgw/pumping"
	"smsgw/ratelimit"
)

var updateCallBytes = flag.Bool("update-call-bytes", false, "rewrite testdata/composed_calls.golden")

// recordingScripts runs scripts on next and writes down each composed
// call's KEYS and ARGV as go-redis puts them on the wire.
type recordingScripts struct {
	next   redisbatch.Scripts
	script *redis.Script
	prefix string
	mu     sync.Mutex
	out    bytes.Buffer
}

func (r *recordingScripts) Run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	if script == r.script {
		r.mu.Lock()
		fmt.Fprintf(&r.out, "  KEYS %d\n", len(keys))
		for _, k := range keys {
			fmt.Fprintf(&r.out, "    %q\n", strings.ReplaceAll(k, r.prefix, "<prefix>"))
		}
		fmt.Fprintf(&r.out, "  ARGV %d\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&r.out, "    %q\n", strings.ReplaceAll(wireArg(a), r.prefix, "<prefix>"))
		}
		r.mu.Unlock()
	}
	return r.next.Run(ctx, script, keys, args...)
}

// wireArg is an argument as go-redis writes it (proto.Writer.WriteArg) for
// the types the parts pass.
func wireArg(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case []byte:
		return string(v)
	case int:
		return strconv.FormatInt(int64(v), 10)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		if v {
			return "1"
		}
		return "0"
	case time.Duration:
		return strconv.FormatInt(v.Nanoseconds(), 10)
	}
	panic(fmt.Sprintf("wireArg: an argument of type %T", v))
}

// TestComposedCallBytes holds the composed call's KEYS and ARGV, as sent,
// for a set of sends (countries with and without an operator, a dependent
// country, IPv4, IPv6 and mapped addresses, keyed sends, resends, a full
// window, a bypass, no pumping, shadow mode and a spend budget) to what
// testdata/composed_calls.golden recorded before the builders were cut
// for allocations: not one byte sent to Redis may change.
func TestComposedCallBytes(t *testing.T) {
	var all bytes.Buffer
	for _, cfg := range []struct {
		name string
		edit func(*pumping.Config)
	}{
		{"defaults", nil},
		{"shadow+spend", func(c *pumping.Config) {
			c.Mode = pumping.ModeShadow
			c.Spend.Hour, c.Spend.Day = 2.5, 40
			c.Spend.Prices = map[string]float64{"GB": 0.031}
			c.ChallengeBudget = true
		}},
	} {
		f := newFixture(t, cfg.edit)
		rec := &recordingScripts{prefix: f.prefix}
		scripts := redisbatch.New(f.rdb, redisbatch.Options{Timeout: testCallTimeout})
		rec.next = scripts
		limiter := ratelimit.New(f.rdb, f.prefix, ratelimit.Options{Scripts: rec})
		pcfg := pumping.DefaultConfig()
		if cfg.edit != nil {
			cfg.edit(&pcfg)
		}
		guard := pumping.New(f.rdb, f.prefix, pcfg, pumping.Options{Scripts: rec})
		adm := New(rec, limiter, guard, codestore.New(f.rdb, f.prefix, rec), f.idem)
		rec.script = adm.script
		sends := []struct {
			ticket, raw, ip, scope string
			max                    int
			bypass, noPumping      bool
		}{
			{"t1", "+14155550123", "203.0.113.7", "", 5, false, false},
			{"t2", "+14155550123", "203.0.113.7", "", 5, false, false}, // a resend
			{"t3", "+447911123456", "2001:db8:1:2::5", "", 5, false, false},
			{"t4", "+447911123457", "::ffff:198.51.100.9", "k1", 5, false, false},
			{"t4", "+447911123457", "::ffff:198.51.100.9", "k1", 5, false, false}, // the keyed send again
			{"t5", "+2348031234567", "192.0.2.1", "k2", 5, false, false},
			{"t6", "+447797123456", "2001:db8:ffff::1", "", 5, false, false}, // Jersey
			{"t7", "+33612345678", "198.51.100.200", "", 1, false, false},
			{"t8", "+33612345678", "198.51.100.200", "", 1, false, false},   // window full: no call
			{"t9", "+33612345678", "198.51.100.200", "k3", 1, false, false}, // window full, keyed: the claim only
			{"t10", "+4915112345678", "203.0.113.8", "", 5, true, false},
			{"t11", "+61412345678", "203.0.113.9", "", 5, false, true},
			{"t12", "+919812345678", "2001:db8:aaaa:bbbb:cccc::1", "k4", 5, false, false},
		}
		for i, s := range sends {
			a := f.admission(t, s.ticket, s.raw, s.ip, s.max)
			a.Bypass, a.Pumping = s.bypass, !s.noPumping
			if s.scope != "" {
				a.Scope, a.ClaimTTL = "send:"+s.scope, time.Minute
			}
			rec.mu.Lock()
			fmt.Fprintf(&rec.out, "%s send %d: %s %s %s scope=%q bypass=%v pumping=%v\n", cfg.name, i, s.ticket, s.raw, s.ip, s.scope, s.bypass, !s.noPumping)
			rec.mu.Unlock()
			out, err := adm.Admit(context.Background(), a)
			if err != nil {
				t.Fatal(err)
			}
			rec.mu.Lock()
			fmt.Fprintf(&rec.out, "  => claim=%v limited=%v allowed=%v issued=%v pending=%v refused=%v shadow=%v\n",
				out.Claim, out.Limited, out.Decision.Allowed, out.Issued, out.Pending != nil,
				out.Pumping.Refused != nil, out.Pumping.Shadow != nil)
			rec.mu.Unlock()
		}
		all.Write(rec.out.Bytes())
	}
	const golden = "testdata/composed_calls.golden"
	if *updateCallBytes {
		if err := os.WriteFile(golden, all.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := all.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("composed calls differ from %s at line %d:\n got %s\nwant %s", golden, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("composed calls differ from %s: %d lines, want %d", golden, len(gl), len(wl))
	}
}
