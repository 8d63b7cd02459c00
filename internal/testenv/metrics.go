package testenv

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric reads a counter or gauge from reg: the series of name whose first
// label values are labelValues (the first series when none are given).
func Metric(t testing.TB, reg prometheus.Gatherer, name string, labelValues ...string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var values []string
			for _, l := range m.GetLabel() {
				values = append(values, l.GetValue())
			}
			if len(values) < len(labelValues) || !slices.Equal(values[:len(labelValues)], labelValues) {
				continue
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s %v", name, labelValues)
	return 0
}
