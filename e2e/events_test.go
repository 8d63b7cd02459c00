package e2e

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"smsgw/internal/testenv"
)

// eventsRig is two replicas of one deployment (one Redis prefix, one
// database, one config) texting through a fake Twilio, with a webhook to rc.
type eventsRig struct {
	e        env
	tw       *fakeTwilio
	rc       *receiver
	replicas []*process
}

func newEventsRig(t *testing.T) *eventsRig {
	t.Helper()
	r := &eventsRig{e: newEnv(t), tw: newFakeTwilio(t), rc: newReceiver(t)}
	hooks, hookEnv := r.rc.webhookConfig()
	config := verificationConfig(r.tw.URL, "https://sms.example.com/v1/webhooks/twilio/status", "10m") + hooks
	env := append([]string{"TWILIO_ACCOUNT_SID=" + twilioSID, "TWILIO_AUTH_TOKEN=" + twilioToken}, hookEnv...)
	for range 2 {
		r.replicas = append(r.replicas, startWith(t, r.e, config, env))
	}
	return r
}

// sendAndVerify texts phone through p and approves the code there: a
// verification.sent and a verification.approved event.
func (r *eventsRig) sendAndVerify(t *testing.T, p *process, phone string) []string {
	t.Helper()
	s := post(t, p.URL+"/v1/otp/send", `{"phone": "`+phone+`"}`, bearer(keyA))
	if s.Status != 202 {
		t.Fatalf("send %s: %d %s", phone, s.Status, s.Raw)
	}
	id := s.Body["verification_id"].(string)
	v := post(t, p.URL+"/v1/otp/verify", `{"phone": "`+phone+`", "code": "`+lastTwilioCode(t, r.tw, phone)+`"}`, bearer(keyA))
	if v.Status != 200 {
		t.Fatalf("verify %s: %d %s", phone, v.Status, v.Raw)
	}
	return []string{"verification.sent@" + id, "verification.approved@" + id}
}

// settled waits until the outbox holds nothing undelivered: after that no
// replica delivers anything more, so the receiver's counts are final.
func (r *eventsRig) settled(t *testing.T, want int) {
	t.Helper()
	testenv.WaitUntil(t, 60*time.Second, "every delivery recorded as delivered", func() error {
		conn := r.e.db(t)
		defer conn.Close(context.Background())
		var delivered, other int
		err := conn.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE state = 'delivered'),
			count(*) FILTER (WHERE state <> 'delivered') FROM event_outbox`).Scan(&delivered, &other)
		if err != nil {
			return err
		}
		if delivered != want || other != 0 {
			return fmt.Errorf("%d delivered, %d not, want %d delivered", delivered, other, want)
		}
		return nil
	})
}

func eventPhone(i int) string { return fmt.Sprintf("+1415555%04d", 2000+i) }

// TestEventsOncePerDeployment: two replicas answer sends and verifies in
// turn; every event they caused reaches the receiver exactly once, signed.
func TestEventsOncePerDeployment(t *testing.T) {
	t.Parallel()
	r := newEventsRig(t)
	var want []string
	for i := range 10 {
		want = append(want, r.sendAndVerify(t, r.replicas[i%2], eventPhone(i))...)
	}
	r.rc.waitEvents(t, 60*time.Second, want)
	r.settled(t, len(want))
	if got := r.rc.received(t); len(got) != len(want) {
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
}

// TestEventsSurviveKillNine: the replica that answered is SIGKILLed right
// after its answers; the other delivers every event they caused.
func TestEventsSurviveKillNine(t *testing.T) {
	t.Parallel()
	r := newEventsRig(t)
	// The receiver fails until the kill, so the killed replica delivers
	// nothing: what arrives, the survivor delivered.
	r.rc.failing.Store(true)
	var want []string
	for i := range 6 {
		want = append(want, r.sendAndVerify(t, r.replicas[0], eventPhone(100+i))...)
	}
	victim := r.replicas[0]
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.exited
	r.rc.failing.Store(false)
	r.rc.waitEvents(t, 90*time.Second, want)
	r.settled(t, len(want))
	r.rc.received(t) // each once
}

// TestEventsRetriedAfterReceiverErrors: the receiver answers 500 for a
// while. Each replica's circuit for the webhook opens at its first failure,
// so the receiver is probed (one request per replica per backoff, at most
// retry_max = 1s apart) instead of being sent every event on every retry;
// once it answers 2xx every event arrives, exactly once.
func TestEventsRetriedAfterReceiverErrors(t *testing.T) {
	t.Parallel()
	r := newEventsRig(t)
	r.rc.failing.Store(true)
	var want []string
	for i := range 10 {
		want = append(want, r.sendAndVerify(t, r.replicas[i%2], eventPhone(200+i))...)
	}
	failed := func() int {
		r.rc.mu.Lock()
		defer r.rc.mu.Unlock()
		return r.rc.failed
	}
	// The backoffs grow to retry_max within 200+400+800 ms of the first
	// failure; then count what the receiver is sent in 3 s. Without the
	// circuit each of the 20 events would be retried about every second
	// (60 requests); with it, 2 replicas probe about once a second each.
	time.Sleep(2 * time.Second)
	before := failed()
	time.Sleep(3 * time.Second)
	if n := failed() - before; n < 2 || n > len(want) {
		t.Fatalf("%d failed deliveries in 3 s against a failing receiver, want probes only: 2 to %d", n, len(want))
	}
	r.rc.failing.Store(false)
	r.rc.waitEvents(t, 60*time.Second, want)
	r.settled(t, len(want))
	r.rc.received(t)
}
