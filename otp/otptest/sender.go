package otptest

import (
	"context"
	"fmt"
	"sync"

	"smsgw/otp"
)

// Text is one text a Sender took.
type Text struct {
	To   string // E.164
	Body string
}

// Sender is an otp.Sender that keeps what it is given and answers with a
// receipt of provider "fake".
type Sender struct {
	SendFn func(ctx context.Context, to otp.Phone, body string) (otp.Receipt, error)

	mu    sync.Mutex
	texts []Text
}

func (s *Sender) Send(ctx context.Context, to otp.Phone, body string) (otp.Receipt, error) {
	s.mu.Lock()
	s.texts = append(s.texts, Text{To: to.E164, Body: body})
	n := len(s.texts)
	s.mu.Unlock()
	if s.SendFn != nil {
		return s.SendFn(ctx, to, body)
	}
	return otp.Receipt{Provider: "fake", MessageID: fmt.Sprintf("m%d", n)}, nil
}

// Texts is every text the provider was asked to send, SendFn's included.
func (s *Sender) Texts() []Text {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Text(nil), s.texts...)
}
