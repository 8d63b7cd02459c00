package pumping

import "github.com/prometheus/client_golang/prometheus"

// metrics are per country and rule: conversion is approvals / texts, in
// PromQL, per country.
type metrics struct {
	texts     *prometheus.CounterVec
	approvals *prometheus.CounterVec
	refusals  *prometheus.CounterVec
	spend     *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		texts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "smsgw_pumping_texts_total",
			Help: "Texts the provider accepted, per destination country.",
		}, []string{"country"}),
		approvals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "smsgw_pumping_approvals_total",
			Help: "Codes approved, per destination country.",
		}, []string{"country"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "smsgw_pumping_refusals_total",
			Help: "Sends a pumping rule refused (mode enforce) or would have (mode shadow), per rule and destination country.",
		}, []string{"rule", "country", "mode"}),
		spend: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "smsgw_pumping_spend_estimated_total",
			Help: "Estimated cost of the texts sent, per destination country, in the currency of pumping.spend.",
		}, []string{"country"}),
	}
	if reg != nil {
		reg.MustRegister(m.texts, m.approvals, m.refusals, m.spend)
	}
	return m
}

func (m *metrics) refused(rule, country, mode string) {
	m.refusals.WithLabelValues(rule, country, mode).Inc()
}
