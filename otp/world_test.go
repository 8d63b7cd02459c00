package otp_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"smsgw/otp"
	"smsgw/otp/otptest"
)

// world is a Service on otptest's fakes: no Redis, no Postgres, no provider.
type world struct {
	svc     *otp.Service
	limiter *otptest.Limiter
	codes   *otptest.Codes
	idem    *otptest.Idempotency
	pumping *otptest.Pumping
	sender  *otptest.Sender
	audit   *otptest.AuditLog
	admit   *otptest.Admitter
	secrets *otp.Secrets
}

const (
	phone     = "+14155552671"
	testPhone = "+14155552672"
	testCode  = "123123"
)

var client = netip.MustParseAddr("198.51.100.7")

// setup edits the world's config and parts before its Service is made.
type setup func(cfg *otp.Config, d *otp.Deps, w *world)

func newWorld(t *testing.T, edits ...setup) *world {
	t.Helper()
	secrets, err := otp.NewSecrets(strings.Repeat("s", otp.MinSecretLength))
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := otp.NewMessages(otp.MessageConfig{Default: "Your code is {{.Code}}", App: "test", TTL: 10 * time.Minute}, 6)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{limiter: &otptest.Limiter{}, codes: &otptest.Codes{}, idem: &otptest.Idempotency{},
		pumping: &otptest.Pumping{}, sender: &otptest.Sender{}, audit: &otptest.AuditLog{}, secrets: secrets}
	w.admit = &otptest.Admitter{Limiter: w.limiter, Pumping: w.pumping, Codes: w.codes, Idempotency: w.idem}
	cfg := otp.Config{
		DefaultRegion: "US",
		IPv6Prefix:    64,
		PhoneRules:    []otp.Rule{{Window: time.Minute, Max: 3}},
		IPRules:       []otp.Rule{{Window: time.Minute, Max: 10}},
		VerifyIPRules: []otp.Rule{{Window: time.Minute, Max: 10}},
		CodeLength:    6,
		CodeTTL:       10 * time.Minute,
		MaxAttempts:   3,
		SendTimeout:   2 * time.Second,
		TestNumbers:   []otp.TestNumber{{Phone: testPhone, Code: testCode}},
	}
	d := otp.Deps{Limiter: w.limiter, Sender: w.sender, Codes: w.codes, Idempotency: w.idem, AuditLog: w.audit,
		Pumping: w.pumping, Secrets: secrets, Messages: msgs, Admitter: w.admit,
		Verifications: &otptest.Verifications{}}
	for _, e := range edits {
		e(&cfg, &d, w)
	}
	w.svc = otp.NewService(cfg, d, slog.New(slog.NewTextHandler(io.Discard, nil)))
	return w
}

var ticketN atomic.Int64

// sendReq is a send of phone from client, its row started as api starts it.
func sendReq(p string) otp.SendRequest {
	id := fmt.Sprintf("t%d", ticketN.Add(1))
	return otp.SendRequest{Ticket: id, RequestID: "req-" + id, Phone: p, ClientIP: client,
		Row: otp.AuditEvent{ID: id, Time: time.Now(), Kind: otp.KindSend, RequestID: "req-" + id, ClientIP: client}}
}

func (w *world) send(t *testing.T, req otp.SendRequest) (otp.SendResult, error) {
	t.Helper()
	return w.svc.Send(context.Background(), req)
}

// lastCode is the code in the newest text.
func (w *world) lastCode(t *testing.T) string {
	t.Helper()
	texts := w.sender.Texts()
	if len(texts) == 0 {
		t.Fatal("nothing was texted")
	}
	return strings.TrimPrefix(texts[len(texts)-1].Body, "Your code is ")
}

func (w *world) pending(t *testing.T) (otp.PendingCode, bool) {
	t.Helper()
	p, ok, err := w.codes.Pending(context.Background(), phone)
	if err != nil {
		t.Fatal(err)
	}
	return p, ok
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	switch {
	case code == "" && err != nil:
		t.Fatalf("err %v, want none", err)
	case code != "" && otp.ErrorCode(err) != code:
		t.Fatalf("err %v (code %s), want code %s", err, otp.ErrorCode(err), code)
	}
}
