package verification_test

import (
	"io"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"smsgw/events"
	"smsgw/internal/testenv"
	"smsgw/otp"
	"smsgw/verification"
)

// newStore is a Store on a fresh database whose events go to webhooks
// (none: the outbox writes nothing), and a US number to record sends to.
func newStore(t *testing.T, webhooks ...events.Webhook) (*verification.Store, *pgxpool.Pool, otp.Phone) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	pool := testenv.Pool(t)
	outbox := events.NewOutbox(pool, events.Options{Webhooks: webhooks, Metrics: prometheus.NewRegistry()}, log)
	ph, err := otp.ParsePhone("+14155552671", "US")
	if err != nil {
		t.Fatal(err)
	}
	return verification.New(pool, outbox, log), pool, ph
}
