package console

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The overview reads this replica's own state from its metrics, so the
// console needs no handle on the providers or the audit writer.

// providerState is one provider's breaker and its sends, on this replica.
type providerState struct {
	Name    string
	Breaker string // closed, half-open, open
	Sent    int
	Failed  int
}

// spoolState is this replica's audit writer.
type spoolState struct {
	Known    bool
	Spooling bool
	Bytes    int64
	Rows     int64
	Queue    int64
}

func readMetrics(g prometheus.Gatherer) ([]providerState, spoolState) {
	var sp spoolState
	if g == nil {
		return nil, sp
	}
	families, err := g.Gather()
	if err != nil {
		return nil, sp
	}
	byName := map[string]*providerState{}
	prov := func(name string) *providerState {
		p := byName[name]
		if p == nil {
			p = &providerState{Name: name, Breaker: "closed"}
			byName[name] = p
		}
		return p
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case "smsgw_provider_breaker_state":
				p := prov(label(m, "provider"))
				p.Breaker = [...]string{"closed", "half-open", "open"}[min(max(int(m.GetGauge().GetValue()), 0), 2)]
			case "smsgw_provider_sends_total":
				p := prov(label(m, "provider"))
				if label(m, "result") == "sent" {
					p.Sent += int(m.GetCounter().GetValue())
				} else {
					p.Failed += int(m.GetCounter().GetValue())
				}
			case "smsgw_audit_spooling":
				sp.Known, sp.Spooling = true, m.GetGauge().GetValue() > 0
			case "smsgw_audit_spool_bytes":
				sp.Bytes = int64(m.GetGauge().GetValue())
			case "smsgw_audit_spool_rows":
				sp.Rows = int64(m.GetGauge().GetValue())
			case "smsgw_audit_queue_depth":
				sp.Queue = int64(m.GetGauge().GetValue())
			}
		}
	}
	out := make([]providerState, 0, len(byName))
	for _, p := range byName {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, sp
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
