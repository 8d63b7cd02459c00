// Package fake is an SMS provider that texts nobody: it keeps what it would
// have sent in a bounded in-memory outbox, for tests and local work.
package fake

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"smsgw/otp"
)

// Message is one text the fake provider accepted.
type Message struct {
	ID     string    `json:"-"`
	To     string    `json:"to"`
	Body   string    `json:"body"`
	SentAt time.Time `json:"sent_at"`
}

// Provider is the fake provider. The outbox keeps the newest texts only, so it
// cannot grow without bound under load.
type Provider struct {
	failPrefixes []string
	onSend       func(Message)

	mu   sync.Mutex
	ring []Message // ring[next] is the oldest once the ring is full
	next int
	full bool
	seq  uint64
}

// New returns a fake provider that keeps the newest capacity texts and
// refuses numbers starting with any of failPrefixes. onSend, when not nil, sees
// every accepted text (dev mode prints them).
func New(capacity int, failPrefixes []string, onSend func(Message)) *Provider {
	if capacity < 1 {
		capacity = 1
	}
	return &Provider{failPrefixes: failPrefixes, onSend: onSend, ring: make([]Message, capacity)}
}

// Send records the text, or refuses it like a real provider refuses a number
// it cannot reach: nothing sent.
func (p *Provider) Send(ctx context.Context, to, body string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", &otp.SendError{Failure: otp.ProviderDown, Reason: "canceled", Err: err}
	}
	for _, prefix := range p.failPrefixes {
		if strings.HasPrefix(to, prefix) {
			return "", &otp.SendError{Failure: otp.NumberProblem, Reason: "refused", Err: errors.New("fake provider refuses " + prefix + "*")}
		}
	}
	p.mu.Lock()
	p.seq++
	m := Message{ID: "FAKE" + strconv.FormatUint(p.seq, 10), To: to, Body: body, SentAt: time.Now().UTC()}
	p.ring[p.next] = m
	p.next++
	if p.next == len(p.ring) {
		p.next, p.full = 0, true
	}
	p.mu.Unlock()
	if p.onSend != nil {
		p.onSend(m)
	}
	return m.ID, nil
}

// Messages returns the kept texts to phone (all texts when phone is empty),
// oldest first.
func (p *Provider) Messages(phone string) []Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := []Message{}
	appendFrom := func(ms []Message) {
		for _, m := range ms {
			if phone == "" || m.To == phone {
				out = append(out, m)
			}
		}
	}
	if p.full {
		appendFrom(p.ring[p.next:])
	}
	appendFrom(p.ring[:p.next])
	return out
}

// OutboxPath is where the kept texts are listed.
const OutboxPath = "/v1/fake/messages"

// Outbox is the endpoint listing the kept texts, oldest first. A phone in
// the query is read like a send's (in region's national notation too), and a
// "+" that arrived as a space (an unencoded query) works.
func (p *Provider) Outbox(region string) otp.Endpoint {
	return otp.Endpoint{Method: http.MethodGet, Path: OutboxPath, Handle: func(w http.ResponseWriter, r *http.Request) error {
		phone, err := otp.ParseQueryPhone(r.URL.Query().Get("phone"), region)
		if err != nil {
			return err
		}
		w.Header().Set("Content-Type", "application/json")
		return json.NewEncoder(w).Encode(p.Messages(phone))
	}}
}
