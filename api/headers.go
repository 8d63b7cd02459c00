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
