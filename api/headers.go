package api

import (
	"net/http"
	"strconv"
	"time"

	"smsgw/otp"
)

// setLimitHeaders writes the IETF httpapi RateLimit headers and their widely
// used X-RateLimit-* forms for the decision's tightest window (a refusal's
// Retry-After comes with its error). Reset times are rounded up: a client that waits
// that long is never early.
func setLimitHeaders(h http.Header, d otp.Decision) {
	b := make([]byte, 0, 40*len(d.Policies))
	for i, p := range d.Policies {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(p.AppendPolicy(append(b, '"')), `";q=`...)
		b = append(strconv.AppendInt(b, int64(p.Rule.Max), 10), ";w="...)
		b = strconv.AppendInt(b, int64(p.Rule.Window/time.Second), 10)
	}
	// Keys in canonical form, set directly: Header.Set would canonicalize
	// each on every request.
	h["Ratelimit-Policy"] = []string{string(b)}

	w := d.Tightest
	remaining := w.Remaining()
	if !d.Allowed {
		remaining = 0
	}
	b = append(w.AppendPolicy(append(b[:0], '"')), `";r=`...)
	b = append(strconv.AppendInt(b, int64(remaining), 10), ";t="...)
	h["Ratelimit"] = []string{string(strconv.AppendInt(b, ceilSeconds(w.Reset), 10))}
	h["X-Ratelimit-Limit"] = []string{strconv.Itoa(w.Rule.Max)}
	h["X-Ratelimit-Remaining"] = []string{strconv.Itoa(remaining)}
	h["X-Ratelimit-Reset"] = []string{strconv.FormatInt(ceilSeconds(time.Duration(d.Now.Add(w.Reset).UnixNano())), 10)}
}

func ceilSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

// setRuleHeaders writes the limit headers for a pumping rule's (or the spend
// ceiling's) refusal or challenge: the rule is the policy, named as the
// body's "rule", with its budget and window, nothing remaining, and its
// reset when the rule gives room back (the body's retry_after). A spend
// budget is money and may have a fraction.
func setRuleHeaders(h http.Header, r otp.PumpingRefusal, now time.Time) {
	limit := strconv.FormatFloat(r.Limit, 'f', -1, 64)
	reset := ceilSeconds(r.RetryAfter)
	h["Ratelimit-Policy"] = []string{`"` + r.Rule + `";q=` + limit + ";w=" + strconv.FormatInt(int64(r.Window/time.Second), 10)}
	h["Ratelimit"] = []string{`"` + r.Rule + `";r=0;t=` + strconv.FormatInt(reset, 10)}
	h["X-Ratelimit-Limit"] = []string{limit}
	h["X-Ratelimit-Remaining"] = []string{"0"}
	h["X-Ratelimit-Reset"] = []string{strconv.FormatInt(ceilSeconds(time.Duration(now.Add(r.RetryAfter).UnixNano())), 10)}
}
