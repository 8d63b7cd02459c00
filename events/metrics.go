package events

import "github.com/prometheus/client_golang/prometheus"

// metrics count the outbox's events and deliveries.
type metrics struct {
	written, delivered, attemptsFailed, failed *prometheus.CounterVec
	pending, failedNow, oldest                 prometheus.Gauge
	circuitOpen                                *prometheus.GaugeVec
	circuitOpened                              *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		written: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "smsgw_events_written_total",
			Help: "Event deliveries written to the outbox, by event type (one per webhook that takes the type)."}, []string{"type"}),
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "smsgw_events_delivered_total",
			Help: "Event deliveries a receiver answered 2xx, by event type."}, []string{"type"}),
		attemptsFailed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "smsgw_events_attempts_failed_total",
			Help: "Delivery attempts that did not get a 2xx answer (retried later), by event type."}, []string{"type"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "smsgw_events_failed_total",
			Help: "Event deliveries given up after events.retry_for and kept as failed, by event type."}, []string{"type"}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "smsgw_events_pending",
			Help: "Event deliveries not made yet (the whole deployment's, measured by this replica)."}),
		failedNow: prometheus.NewGauge(prometheus.GaugeOpts{Name: "smsgw_events_failed",
			Help: "Event deliveries kept as failed, waiting for an operator's retry."}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{Name: "smsgw_events_oldest_pending_seconds",
			Help: "Age of the oldest event delivery not made yet (0 when none)."}),
		circuitOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "smsgw_events_circuit_open",
			Help: "1 while this replica holds back a webhook's deliveries after a failed attempt (one probe per backoff), else 0; by webhook URL without its query."}, []string{"webhook"}),
		circuitOpened: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "smsgw_events_circuit_opened_total",
			Help: "Times this replica's circuit for a webhook opened (a failed attempt after a 2xx or at start), by webhook URL without its query."}, []string{"webhook"}),
	}
	if reg != nil {
		reg.MustRegister(m.written, m.delivered, m.attemptsFailed, m.failed, m.pending, m.failedNow, m.oldest,
			m.circuitOpen, m.circuitOpened)
	}
	return m
}
