package events

import (
	"net/url"
	"sync"
	"time"
)

// circuits hold, per webhook, whether this replica claims its rows. After a
// failed attempt a webhook's circuit opens: none of its rows is claimed
// until the backoff ends (RetryBase, doubled per failed probe up to
// RetryMax, less up to a fifth); then one row is claimed as a probe. A 2xx
// answer closes the circuit and its rows are claimed in full batches again;
// another failure opens it for the next, longer backoff. The rows meanwhile
// stay pending and untouched: not claimed, not counted as attempts, their
// next_attempt_at unchanged (due), so a dead receiver costs one claimed,
// posted and rescheduled row per backoff instead of every row. Rows whose
// retry_until passes while the circuit is open are kept as failed by the
// outbox's minutely maintenance (failUnattempted).
//
// The circuit is this replica's, in memory, not shared through Postgres.
// Shared state would need a write at every opening and probe and a read at
// every claim, on the tables whose writes the circuit exists to spare; per
// replica, n replicas send a dead receiver n probes per backoff instead of
// one, a small price for a handful of replicas. And whether a receiver
// answers is a replica's own view: one replica cut off from a receiver
// stops only its own claims, and the others, which reach it, deliver the
// rows it leaves. A replica that starts (or restarts) starts closed and
// learns at its first failure.
type circuits struct {
	now     func() time.Time
	backoff func(failures int) time.Duration
	m       *metrics

	mu sync.Mutex
	by map[string]*circuit // webhook URL → its circuit
}

type circuit struct {
	label    string    // the webhook for metrics and logs, without query or user info
	failures int       // failed attempts since the last 2xx; 0: closed
	until    time.Time // no claim before this while open
	probing  bool      // a probe is claimed and not answered yet
	lastErr  string    // the last failure's text
}

func newCircuits(urls []string, backoff func(int) time.Duration, m *metrics) *circuits {
	c := &circuits{now: time.Now, backoff: backoff, m: m, by: make(map[string]*circuit, len(urls))}
	for _, u := range urls {
		c.by[u] = &circuit{label: webhookLabel(u)}
		m.circuitOpen.WithLabelValues(c.by[u].label).Set(0)
		m.circuitOpened.WithLabelValues(c.by[u].label).Add(0)
	}
	return c
}

// plan says what one claim takes: a full batch of each closed webhook and
// one probe row of each open webhook whose backoff has ended (marked as
// probing until probeDone or an outcome).
func (c *circuits) plan(urls []string) (closed, probes []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for _, u := range urls {
		s := c.by[u]
		switch {
		case s.failures == 0:
			closed = append(closed, u)
		case !s.probing && !now.Before(s.until):
			s.probing = true
			probes = append(probes, u)
		}
	}
	return closed, probes
}

// probeDone ends a probe that claimed no row (none of the webhook's rows
// was due): the next claim probes again.
func (c *circuits) probeDone(u string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.by[u]; s != nil {
		s.probing = false
	}
}

// probeNow ends u's backoff: if its circuit is open, the next claim
// probes it.
func (c *circuits) probeNow(u string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.by[u]; s != nil && s.failures > 0 {
		s.until = time.Time{}
	}
}

// open reports whether u's rows are held back now, so a claimed row that
// is not the probe is put back unattempted.
func (c *circuits) open(u string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.by[u]
	return s != nil && s.failures > 0
}

// succeeded closes u's circuit; it reports whether it was open.
func (c *circuits) succeeded(u string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.by[u]
	if s == nil || s.failures == 0 {
		return false
	}
	s.failures, s.until, s.probing, s.lastErr = 0, time.Time{}, false, ""
	c.m.circuitOpen.WithLabelValues(s.label).Set(0)
	return true
}

// failed notes a failed attempt at u. A probe's failure, or the first
// failure of a closed circuit, opens it for the next backoff (which it
// returns, with whether the circuit was closed); the failure of a row
// claimed with others before the circuit opened changes nothing.
func (c *circuits) failed(u string, probe bool, msg string) (wait time.Duration, opened bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.by[u]
	if s == nil {
		return 0, false
	}
	s.lastErr = msg
	if s.failures > 0 && !probe {
		return 0, false
	}
	opened = s.failures == 0
	s.failures++
	s.probing = false
	wait = c.backoff(s.failures)
	s.until = c.now().Add(wait)
	if opened {
		c.m.circuitOpen.WithLabelValues(s.label).Set(1)
		c.m.circuitOpened.WithLabelValues(s.label).Inc()
	}
	return wait, opened
}

// openNow lists the webhooks whose circuits are open, with their last
// failure's text.
func (c *circuits) openNow() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]string{}
	for u, s := range c.by {
		if s.failures > 0 {
			out[u] = s.lastErr
		}
	}
	return out
}

// webhookLabel is u without its query, fragment and user info, which may
// hold a token the receiver checks: what metrics and logs name.
func webhookLabel(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "unparsable webhook URL"
	}
	return p.Scheme + "://" + p.Host + p.EscapedPath()
}
