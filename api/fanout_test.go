package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"smsgw/internal/testenv"
)

func TestFanout(t *testing.T) {
	ctx := context.Background()
	logs := &testenv.Buffer{}
	f := newFanout(slog.New(slog.NewJSONHandler(logs, nil)), prometheus.NewRegistry())
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	f.now = func() time.Time { return now }
	backend := netip.MustParseAddr("10.1.2.3")
	phone := func(i int) string { return fmt.Sprintf("+1415555%04d", i) }

	t.Run("one person, many sends", func(t *testing.T) {
		for range 100 {
			f.saw(ctx, netip.MustParseAddr("198.51.100.7"), "+14155552671")
		}
		if n := counted(f.crossed); n != 0 {
			t.Fatalf("counted %v", n)
		}
	})
	t.Run("a backend forwarding nothing", func(t *testing.T) {
		for i := range fanoutNumbers - 1 {
			f.saw(ctx, backend, phone(i))
		}
		if n := counted(f.crossed); n != 0 {
			t.Fatalf("counted %v below the line", n)
		}
		f.saw(ctx, backend, phone(fanoutNumbers))
		for i := range 50 { // counted once per epoch
			f.saw(ctx, backend, phone(100+i))
		}
		if n := counted(f.crossed); n != 1 {
			t.Fatalf("counted %v, want 1", n)
		}
		if !strings.Contains(logs.String(), "forward_client_ip") || !strings.Contains(logs.String(), `"client_ip":"10.1.2.3/32"`) {
			t.Fatalf("log: %s", logs)
		}
	})
	t.Run("IPv6 counted per /64, warned once a minute", func(t *testing.T) {
		lines := strings.Count(logs.String(), "\n")
		for i := range fanoutNumbers {
			f.saw(ctx, netip.MustParseAddr(fmt.Sprintf("2001:db8::%x", i+1)), phone(1000+i))
		}
		if n := counted(f.crossed); n != 2 {
			t.Fatalf("counted %v, want 2", n)
		}
		if got := strings.Count(logs.String(), "\n"); got != lines {
			t.Fatalf("warned again within a minute:\n%s", logs)
		}
	})
	t.Run("a new epoch counts afresh", func(t *testing.T) {
		now = now.Add(fanoutEvery)
		for i := range fanoutNumbers {
			f.saw(ctx, backend, phone(i))
		}
		if n := counted(f.crossed); n != 3 {
			t.Fatalf("counted %v, want 3", n)
		}
		if got := strings.Count(logs.String(), "forward_client_ip"); got != 2 {
			t.Fatalf("%d warnings, want 2:\n%s", got, logs)
		}
	})
	t.Run("unparsed phones and unknown addresses are not counted", func(t *testing.T) {
		f.saw(ctx, netip.Addr{}, "+14155552671")
		f.saw(ctx, backend, "")
	})
}

func counted(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// BenchmarkFanoutSaw is what noticing fanout costs a send, from many
// goroutines at once (go test -run '^$' -bench FanoutSaw ./api).
func BenchmarkFanoutSaw(b *testing.B) {
	f := newFanout(slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	ctx := context.Background()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			f.saw(ctx, netip.AddrFrom4([4]byte{198, 51, byte(i >> 8), byte(i)}), fmt.Sprintf("+1415555%04d", i%10000))
		}
	})
}
