package audit_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"smsgw/audit"
	"smsgw/internal/testenv"
	"smsgw/otp"
)

// BenchmarkWrite measures one batch of 100 send rows into Postgres: a plain
// COPY into audit_log (how batches were written before, unable to skip a row
// stored already), the INSERT ... ON CONFLICT of Write, and Write of a send's
// two versions (sending, then its final outcome in the next batch). Compare
// rows/s in the same run.
func BenchmarkWrite(b *testing.B) {
	pool := testenv.Pool(b)
	ctx := context.Background()
	const batch = 100
	rows := func() []otp.AuditEvent {
		out := make([]otp.AuditEvent, batch)
		for i := range out {
			out[i] = event(i)
		}
		return out
	}
	b.Run("copy", func(b *testing.B) {
		for b.Loop() {
			events := rows()
			_, err := pool.CopyFrom(ctx, pgx.Identifier{"audit_log"}, []string{"id", "created_at", "kind", "outcome", "request_id", "phone_e164", "client_ip", "provider", "provider_message_id"},
				pgx.CopyFromSlice(len(events), func(i int) ([]any, error) {
					e := events[i]
					return []any{e.ID, e.Time, e.Kind, e.Outcome, e.RequestID, e.Phone, e.ClientIP, e.Provider, e.MessageID}, nil
				}))
			if err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("upsert", func(b *testing.B) {
		for b.Loop() {
			if err := audit.Write(ctx, pool, rows()); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("upsert-sending-then-final", func(b *testing.B) {
		for b.Loop() {
			final := rows()
			sending := make([]otp.AuditEvent, len(final))
			for i, e := range final {
				e.Outcome, e.Provider, e.MessageID = otp.OutcomeSending, "", ""
				sending[i] = e
			}
			if err := audit.Write(ctx, pool, sending); err != nil {
				b.Fatal(err)
			}
			if err := audit.Write(ctx, pool, final); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "rows/s")
	})
}
