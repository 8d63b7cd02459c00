package fake

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"smsgw/internal/testenv"
	"smsgw/otp"
)

func TestOutboxKeepsTheNewestInOrder(t *testing.T) {
	p := New(3, nil, nil)
	for i := 0; i < 5; i++ {
		if _, err := p.Send(context.Background(), "+14155552671", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	p.Send(context.Background(), "+447400123456", "other")
	got := p.Messages("+14155552671")
	if len(got) != 2 || got[0].Body != "3" || got[1].Body != "4" {
		t.Fatalf("messages %+v, want the newest two of the phone, oldest first", got)
	}
	if all := p.Messages(""); len(all) != 3 || all[2].Body != "other" {
		t.Fatalf("all %+v", all)
	}
}

func TestOutboxStaysBoundedUnderConcurrency(t *testing.T) {
	p := New(100, nil, nil)
	testenv.Race(t, 8, func(int) string {
		for i := 0; i < 1000; i++ {
			p.Send(context.Background(), "+14155552671", "x")
		}
		return ""
	})
	if n := len(p.Messages("")); n != 100 {
		t.Fatalf("outbox holds %d, want its capacity 100", n)
	}
}

func TestFailPrefixesAreRefusedAndNothingIsKept(t *testing.T) {
	var seen int
	p := New(10, []string{"+1201", "+44"}, func(Message) { seen++ })
	for _, to := range []string{"+12015550123", "+447400123456"} {
		_, err := p.Send(context.Background(), to, "x")
		var se *otp.SendError
		if !errors.As(err, &se) || se.Failure != otp.NumberProblem || se.Reason != "refused" {
			t.Fatalf("%s: %v, want a not-sent refusal", to, err)
		}
	}
	if id, err := p.Send(context.Background(), "+14155552671", "x"); err != nil || id == "" {
		t.Fatalf("ordinary number: %q %v", id, err)
	}
	if n := len(p.Messages("")); n != 1 || seen != 1 {
		t.Fatalf("kept %d, saw %d; want 1 and 1", n, seen)
	}
}
