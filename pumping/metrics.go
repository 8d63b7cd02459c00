package pumping

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are per country and rule: conversion is approvals / texts, in
// PromQL, per country.
type metrics struct {
	texts     *prometheus.CounterVec
	approvals *prometheus.CounterVec
	refusals  *prometheus.CounterVec
	spend     *prometheus.CounterVec
	// opTexts and opApprovals are per destination operator (its country and
	// name as libphonenumber's prefix data has them: a bounded set), for
	// the numbers that have one.
	opTexts, opApprovals, opRefusals *prometheus.CounterVec
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
		opTexts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "smsgw_pumping_operator_texts_total",
			Help: "Texts the provider accepted, per destination operator (numbers with operator data).",
		}, []string{"country", "operator"}),
		opApprovals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "smsgw_pumping_operator_approvals_total",
			Help: "Codes approved, per destination operator (numbers with operator data).",
		}, []string{"country", "operator"}),
		opRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "smsgw_pumping_operator_refusals_total",
			Help: "Sends the operator rule refused (mode enforce) or would have (mode shadow), per destination operator.",
		}, []string{"country", "operator", "mode"}),
	}
	if reg != nil {
		reg.MustRegister(m.texts, m.approvals, m.refusals, m.spend, m.opTexts, m.opApprovals, m.opRefusals)
	}
	return m
}

// refused counts a refusal; subject is the refusing subject's id, which
// for the operator rule names the operator ("NG/Glo").
func (m *metrics) refused(rule, country, mode, subject string) {
	m.refusals.WithLabelValues(rule, country, mode).Inc()
	if rule == RuleOperator {
		if _, name, ok := strings.Cut(subject, "/"); ok {
			m.opRefusals.WithLabelValues(country, name, mode).Inc()
		}
	}
}
