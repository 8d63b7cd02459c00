package console

import (
	"net/http"
	"sort"
	"time"

	"smsgw/otp"
)

// period is one column of the overview: the last hour or the last day.
type period struct {
	Name      string
	Texts     int
	Approvals int
	Refused   int
	Refusals  []ruleCount
	Countries []countryCount
	Spend     float64
	HasSpend  bool
	Chart     string
	Err       string
}

type ruleCount struct {
	Outcome, Reason string
	Count           int
}

type countryCount struct {
	Country          string
	Texts, Approvals int
	Spend            float64
}

type overviewData struct {
	Periods   []period
	Providers []providerState
	Spool     spoolState
	Holds     []otp.PumpingHold
	HoldsErr  string
	NoAudit   bool
	NoPumping bool
}

// refusal is a send outcome that texted nobody because a rule said no.
func refusal(outcome string) bool {
	return outcome == otp.ERateLimited || outcome == otp.EPhoneNotAllowed
}

func (c *Console) overviewPage(w http.ResponseWriter, r *http.Request, a *action) error {
	ctx := r.Context()
	now := c.opt.Now()
	data := overviewData{NoAudit: c.d.Audit == nil, NoPumping: c.d.Pumping == nil}
	if c.d.Audit != nil {
		for _, p := range []struct {
			name   string
			span   time.Duration
			bucket time.Duration
			format string
		}{{"Last hour", time.Hour, 5 * time.Minute, "15:04"}, {"Last day", 24 * time.Hour, time.Hour, "15:00"}} {
			data.Periods = append(data.Periods, c.period(r, p.name, now.Add(-p.span), p.bucket, p.format))
		}
	}
	data.Providers, data.Spool = readMetrics(c.d.Metrics)
	if c.d.Pumping != nil {
		holds, _, err := c.d.Pumping.Holds(ctx)
		if err != nil {
			data.HoldsErr = "pumping holds are unavailable right now"
		}
		data.Holds = holds
	}
	c.render(w, r, http.StatusOK, "overview", &a.sess, page{Title: "Overview", Nav: "overview", Data: data})
	return nil
}

func (c *Console) period(r *http.Request, name string, since time.Time, bucket time.Duration, format string) period {
	p := period{Name: name, HasSpend: c.opt.TextPrice != nil}
	counts, err := c.d.Audit.Counts(r.Context(), since)
	if err != nil {
		c.log.WarnContext(r.Context(), "audit counts not read", "err", err)
		p.Err = "the audit log is unavailable right now"
		return p
	}
	rules := map[ruleCount]int{}
	countries := map[string]*countryCount{}
	country := func(cc string) *countryCount {
		if countries[cc] == nil {
			countries[cc] = &countryCount{Country: cc}
		}
		return countries[cc]
	}
	for _, n := range counts {
		switch {
		case n.Kind == otp.KindSend && n.Outcome == otp.OutcomeSent && n.Reason != "idempotent_replay":
			p.Texts += n.Count
			country(n.Country).Texts += n.Count
		case n.Kind == otp.KindVerify && n.Outcome == otp.OutcomeApproved:
			p.Approvals += n.Count
			country(n.Country).Approvals += n.Count
		case n.Kind == otp.KindSend && refusal(n.Outcome):
			p.Refused += n.Count
			rules[ruleCount{Outcome: n.Outcome, Reason: n.Reason}] += n.Count
		}
	}
	for k, v := range rules {
		k.Count = v
		p.Refusals = append(p.Refusals, k)
	}
	sort.Slice(p.Refusals, func(i, j int) bool {
		a, b := p.Refusals[i], p.Refusals[j]
		return a.Count > b.Count || a.Count == b.Count && a.Reason < b.Reason
	})
	for _, cc := range countries {
		if c.opt.TextPrice != nil {
			cc.Spend = float64(cc.Texts) * c.opt.TextPrice(cc.Country)
			p.Spend += cc.Spend
		}
		p.Countries = append(p.Countries, *cc)
	}
	sort.Slice(p.Countries, func(i, j int) bool {
		a, b := p.Countries[i], p.Countries[j]
		return a.Texts > b.Texts || a.Texts == b.Texts && a.Country < b.Country
	})

	buckets, err := c.d.Audit.Buckets(r.Context(), since, bucket)
	if err != nil {
		c.log.WarnContext(r.Context(), "audit buckets not read", "err", err)
		return p
	}
	start := since.Truncate(bucket)
	n := int(c.opt.Now().Sub(start)/bucket) + 1
	labels := make([]string, n)
	texts, approvals, refused := make([]int, n), make([]int, n), make([]int, n)
	for i := range labels {
		labels[i] = start.Add(time.Duration(i) * bucket).UTC().Format(format)
	}
	for _, b := range buckets {
		i := int(b.Start.Sub(start) / bucket)
		if i < 0 || i >= n {
			continue
		}
		switch {
		case b.Kind == otp.KindSend && b.Outcome == otp.OutcomeSent:
			texts[i] += b.Count
		case b.Kind == otp.KindVerify && b.Outcome == otp.OutcomeApproved:
			approvals[i] += b.Count
		case b.Kind == otp.KindSend && refusal(b.Outcome):
			refused[i] += b.Count
		}
	}
	p.Chart = barChart(name+": texts, approvals and refusals (UTC)", labels, []series{
		{Name: "texts", Class: "s-texts", Values: texts},
		{Name: "approvals", Class: "s-approvals", Values: approvals},
		{Name: "refused", Class: "s-refused", Values: refused},
	})
	return p
}
