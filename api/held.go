package api

import (
	"hash/maphash"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"smsgw/otp"
)

// The refused path's two memories. A flood is one client sending the same
// body again and again, each answered 429 from the limiter's refusal cache:
// decoding the same JSON and building the same answer for each cost the
// refused path a third of smsgw's own CPU under wrk
// (docs/measurements/2026-11-27-refused-path-held-answer.md). Both are
// small tables of immutable entries, each slot an atomic pointer: a
// request reads one slot without a lock, and a newer entry replaces an
// older one that hashes to the same slot. Neither changes an answer: a hit
// is an exact match of everything the answer is made from, and every
// request still goes through the domain (its pumping holds, overrides,
// audit and refusal cache) and is audited and counted as before.

// heldSlots is each table's size: a flood's few hot bodies and answers fit,
// and an attacker's fresh ones only replace each other.
const heldSlots = 256

// heldBodyMax is the largest body the request memory keeps: a send's
// usual body is a few dozen bytes.
const heldBodyMax = 512

// heldRequest is a send body that decoded and validated, and whose request
// was refused: the decoded request, to be reused for the same bytes.
type heldRequest struct {
	body string
	req  sendRequest
}

// heldRequests remembers refused sends' bodies, decoded. Only a body with
// neither client_ip nor limit_keys is kept: its decoding is then all there
// is to its shape (nothing depends on the API key), so the same bytes mean
// the same request.
type heldRequests struct {
	seed  maphash.Seed
	slots [heldSlots]atomic.Pointer[heldRequest]
}

func newHeldRequests() *heldRequests { return &heldRequests{seed: maphash.MakeSeed()} }

// cacheable says whether req, decoded from a body, may be kept.
func (h *heldRequests) cacheable(body []byte, req *sendRequest) bool {
	return len(body) <= heldBodyMax && req.ClientIP == "" && len(req.LimitKeys) == 0
}

// lookup is the request decoded from body when it was kept.
func (h *heldRequests) lookup(body []byte) (sendRequest, bool) {
	if len(body) > heldBodyMax {
		return sendRequest{}, false
	}
	e := h.slots[maphash.Bytes(h.seed, body)%heldSlots].Load()
	if e == nil || e.body != string(body) {
		return sendRequest{}, false
	}
	return e.req, true
}

// keep remembers req as body's decoding.
func (h *heldRequests) keep(body []byte, req sendRequest) {
	i := maphash.Bytes(h.seed, body) % heldSlots
	if e := h.slots[i].Load(); e != nil && e.body == string(body) {
		return
	}
	h.slots[i].Store(&heldRequest{body: string(body), req: req})
}

// answerKey is, with the policies (samePolicies), everything a limiter
// refusal's answer is made of: its tightest window, the whole seconds of
// its waits and the moment its window resets.
type answerKey struct {
	scope, name string
	rule        otp.Rule
	retry       int64 // Retry-After and the body's retry_after
	reset       int64 // RateLimit's t
	resetAt     int64 // X-RateLimit-Reset, Unix seconds
}

func answerKeyOf(d otp.Decision) answerKey {
	w := d.Tightest
	return answerKey{scope: w.Scope, name: w.Name, rule: w.Rule, retry: d.RetryAfterSeconds(), reset: ceilSeconds(w.Reset),
		resetAt: ceilSeconds(time.Duration(d.Now.Add(w.Reset).UnixNano()))}
}

// samePolicies says whether two decisions' policies read the same in
// RateLimit-Policy (their use and resets are not in it).
func samePolicies(a, b []otp.Window) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Scope != b[i].Scope || a[i].Name != b[i].Name || a[i].Rule != b[i].Rule {
			return false
		}
	}
	return true
}

// heldAnswer is a limiter refusal's answer, built once: its limit headers,
// Retry-After and error body. The header values are shared by every
// answer that uses them and never written to (each slice is full, so an
// append would copy it).
type heldAnswer struct {
	key                                      answerKey
	policies                                 []otp.Window
	policy, limit, remaining, limitN, resetN []string
	retryAfter                               []string
	body                                     []byte
}

// heldAnswers remembers the answers of limiter refusals.
type heldAnswers struct {
	seed  maphash.Seed
	slots [heldSlots]atomic.Pointer[heldAnswer]
}

func newHeldAnswers() *heldAnswers { return &heldAnswers{seed: maphash.MakeSeed()} }

// answer is d's answer: remembered, or built as setLimitHeaders,
// RateLimitedError and errorBody build it and then remembered.
func (h *heldAnswers) answer(d otp.Decision) *heldAnswer {
	k := answerKeyOf(d)
	i := maphash.Comparable(h.seed, k) % heldSlots
	if a := h.slots[i].Load(); a != nil && a.key == k && samePolicies(a.policies, d.Policies) {
		return a
	}
	hdr := make(map[string][]string, 5)
	setLimitHeaders(hdr, d)
	e := otp.RateLimitedError(d)
	a := &heldAnswer{key: k, policies: slices.Clone(d.Policies), policy: hdr["Ratelimit-Policy"], limit: hdr["Ratelimit"],
		limitN: hdr["X-Ratelimit-Limit"], remaining: hdr["X-Ratelimit-Remaining"], resetN: hdr["X-Ratelimit-Reset"],
		retryAfter: []string{strconv.FormatInt(e.RetryAfter, 10)}, body: errorBody(e)}
	h.slots[i].Store(a)
	return a
}

// setHeaders writes the answer's headers: those of setLimitHeaders and the
// Retry-After that answerError adds to a rate_limited error.
func (a *heldAnswer) setHeaders(h map[string][]string) {
	h["Ratelimit-Policy"] = a.policy
	h["Ratelimit"] = a.limit
	h["X-Ratelimit-Limit"] = a.limitN
	h["X-Ratelimit-Remaining"] = a.remaining
	h["X-Ratelimit-Reset"] = a.resetN
	h["Retry-After"] = a.retryAfter
}
