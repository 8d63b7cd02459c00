package sender_test

import (
	"context"
	"errors"
	"testing"

	"smsgw/otp"
	"smsgw/sender"
	"smsgw/sender/fake"
)

// scripted answers every Send with the same error.
type scripted struct {
	err   error
	calls int
}

func (s *scripted) Send(context.Context, string, string) (string, error) {
	s.calls++
	return "", s.err
}

func TestRouter(t *testing.T) {
	refusing := func() *scripted {
		return &scripted{err: &otp.SendError{NotSent: true, Reason: "invalid_number", Err: errors.New("no")}}
	}
	unsure := func() *scripted {
		return &scripted{err: &otp.SendError{Reason: "timeout", Err: context.DeadlineExceeded}}
	}
	tests := []struct {
		name         string
		first        *scripted
		wantProvider string
		wantErr      bool
		wantNotSent  bool
		wantFallback int // texts the second provider took
	}{
		{"refusal fails over", refusing(), "backup", false, false, 1},
		{"unknown outcome does not fail over", unsure(), "primary", true, false, 0},
		{"a bare error is an unknown outcome", &scripted{err: errors.New("boom")}, "primary", true, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			backup := fake.New(10, nil, nil)
			r := sender.NewRouter(sender.Named{Name: "primary", Provider: tt.first}, sender.Named{Name: "backup", Provider: backup})
			rec, err := r.Send(context.Background(), phone(t), "hi")
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v", err)
			}
			if err != nil {
				var se *otp.SendError
				if !errors.As(err, &se) || se.Provider != tt.wantProvider || se.NotSent != tt.wantNotSent {
					t.Fatalf("err = %#v", err)
				}
			} else if rec.Provider != tt.wantProvider || rec.MessageID == "" {
				t.Fatalf("receipt %+v", rec)
			}
			if n := len(backup.Messages("")); n != tt.wantFallback {
				t.Fatalf("backup took %d texts, want %d", n, tt.wantFallback)
			}
		})
	}
}

func TestRouterAllRefuse(t *testing.T) {
	a := &scripted{err: &otp.SendError{NotSent: true, Reason: "refused", Err: errors.New("a")}}
	b := &scripted{err: &otp.SendError{NotSent: true, Reason: "unreachable", Err: errors.New("b")}}
	_, err := sender.NewRouter(sender.Named{Name: "a", Provider: a}, sender.Named{Name: "b", Provider: b}).Send(context.Background(), phone(t), "hi")
	var se *otp.SendError
	if !errors.As(err, &se) || !se.NotSent || se.Provider != "b" || se.Reason != "unreachable" {
		t.Fatalf("err = %#v: want the last refusal, not sent", err)
	}
	if a.calls != 1 || b.calls != 1 {
		t.Fatalf("calls %d %d", a.calls, b.calls)
	}
}

func phone(t *testing.T) otp.Phone {
	t.Helper()
	p, err := otp.ParsePhone("+14155552671", "")
	if err != nil {
		t.Fatal(err)
	}
	return p
}
