package api

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// What counts as one address sending for many numbers: this many distinct
// numbers within fanoutEvery. A person texts one or two; a family behind one
// router a few.
const (
	fanoutNumbers = 20
	fanoutEvery   = 10 * time.Minute
	// fanoutAddrs bounds the addresses followed at once (an attacker picks
	// them): past it the count starts afresh.
	fanoutAddrs = 4096
	// fanoutWarnEvery spaces the warnings in the log.
	fanoutWarnEvery = time.Minute
)

// fanout notices a client address that sends for many distinct numbers:
// what a backend looks like that calls smsgw for its users without passing
// their addresses as client_ip, so that all of them share its per-IP
// windows and network budgets and are refused within minutes. Each address
// that crosses the line is counted in a metric, and the log says so at most
// once a minute, with what to do.
type fanout struct {
	log      *slog.Logger
	crossed  prometheus.Counter
	now      func() time.Time
	mu       sync.Mutex
	epoch    time.Time
	seen     map[netip.Prefix]*fanoutNumbersSeen
	lastWarn time.Time
}

type fanoutNumbersSeen struct {
	phones  map[string]struct{}
	flagged bool // counted already in this epoch
}

func newFanout(log *slog.Logger, reg prometheus.Registerer) *fanout {
	f := &fanout{log: log, now: time.Now, seen: map[netip.Prefix]*fanoutNumbersSeen{},
		crossed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "smsgw_client_ip_fanout_total",
			Help: "Client addresses (IPv6 per /64) seen sending for 20 or more distinct numbers within 10 minutes: " +
				"a backend that forwards no client_ip looks like this.",
		})}
	reg.MustRegister(f.crossed)
	return f
}

// saw notes a send for phone (E.164; "" when it did not parse) from addr.
func (f *fanout) saw(ctx context.Context, addr netip.Addr, phone string) {
	if phone == "" || !addr.IsValid() {
		return
	}
	bits := 32
	if addr.Is6() {
		bits = 64
	}
	key, _ := addr.Prefix(bits)
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.seen[key]
	if now.Sub(f.epoch) >= fanoutEvery || (n == nil && len(f.seen) >= fanoutAddrs) {
		f.epoch, f.seen, n = now, map[netip.Prefix]*fanoutNumbersSeen{}, nil
	}
	if n == nil {
		n = &fanoutNumbersSeen{phones: map[string]struct{}{}}
		f.seen[key] = n
	}
	if n.flagged {
		return
	}
	n.phones[phone] = struct{}{}
	if len(n.phones) < fanoutNumbers {
		return
	}
	n.flagged, n.phones = true, nil
	f.crossed.Inc()
	if now.Sub(f.lastWarn) >= fanoutWarnEvery {
		f.lastWarn = now
		f.log.WarnContext(ctx, "one client address sends for many distinct numbers: if it is a backend calling smsgw for its users, "+
			"give its API key forward_client_ip = true and send each user's address as client_ip, or its users share its limits",
			"client_ip", key.String(), "numbers", fanoutNumbers, "within", fanoutEvery.String())
	}
}
