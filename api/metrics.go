package api

import "github.com/prometheus/client_golang/prometheus"

type httpMetrics struct {
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	outcomes  *prometheus.CounterVec
	unaudited prometheus.Counter
	// unrecorded counts accepted sends and code-changing verifies whose
	// verification record (and events) could not be written.
	unrecorded *prometheus.CounterVec
	segments   *prometheus.CounterVec
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "smsgw_http_requests_total", Help: "HTTP requests by route and status.",
		}, []string{"route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "smsgw_http_request_duration_seconds", Help: "HTTP request latency by route.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "smsgw_requests_total", Help: "Send and verify requests by outcome, as audited.",
		}, []string{"kind", "outcome", "reason"}),
	}
	m.unaudited = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "smsgw_requests_unanswered_total", Help: "Requests answered 503 (admin calls: dropped unanswered) because their audit row could not be made durable.",
	})
	m.unrecorded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "smsgw_verifications_unrecorded_total", Help: "Sends and verifies whose verification record and events could not be written (Postgres away).",
	}, []string{"kind"})
	m.segments = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "smsgw_sms_segments_total", Help: "SMS segments of the code texts handed to a provider, by the number's country (what carriers bill).",
	}, []string{"country"})
	reg.MustRegister(m.requests, m.duration, m.outcomes, m.unaudited, m.unrecorded, m.segments)
	return m
}
