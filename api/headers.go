package api

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"smsgw/otp"
)

// setLimitHeaders writes the IETF httpapi RateLimit headers and their widely
// used X-RateLimit-* forms for the decision's tightest window (a refusal's
// Retry-After comes with its error). Reset times are rounded up: a client that waits
// that long is never early.
func setLimitHeaders(h http.Header, d otp.Decision) {
	var policy strings.Builder
	for i, p := range d.Policies {
		if i > 0 {
			policy.WriteString(", ")
		}
		policy.WriteString(`"` + p.Policy() + `";q=` + strconv.Itoa(p.Rule.Max) + ";w=" + strconv.FormatInt(int64(p.Rule.Window/time.Second), 10))
	}
	h.Set("RateLimit-Policy", policy.String())

	w := d.Tightest
	remaining := w.Remaining()
	if !d.Allowed {
		remaining = 0
	}
	t := ceilSeconds(w.Reset)
	h.Set("RateLimit", `"`+w.Policy()+`";r=`+strconv.Itoa(remaining)+";t="+strconv.FormatInt(t, 10))
	h.Set("X-RateLimit-Limit", strconv.Itoa(w.Rule.Max))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilSeconds(time.Duration(d.Now.Add(w.Reset).UnixNano())), 10))
}

func ceilSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}
