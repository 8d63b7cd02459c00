package audit

import (
	"fmt"
	"testing"
	"time"

	"smsgw/otp"
)

// TestRollupMemoryIsBounded: a flood of a new subject per request, over
// several minutes, keeps at most maxKeys subjects counted and maxKeys open
// rollups (plus those of any subject, as few as kinds, outcomes and
// reasons), and counts every answer.
func TestRollupMemoryIsBounded(t *testing.T) {
	const maxKeys = 100
	r := newRollups(20, 1_000_000, maxKeys)
	emitted := 0
	emit := func(otp.AuditEvent) bool { emitted++; return true }
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for minute := 0; minute < 3; minute++ {
		for i := 0; i < 10_000; i++ {
			e := otp.AuditEvent{Time: at.Add(time.Duration(minute)*time.Minute + time.Duration(i)*time.Millisecond),
				Kind: otp.KindSend, Outcome: otp.EInvalidPhone, Reason: "invalid_phone"}
			r.note(e, fmt.Sprintf("ip:10.0.%d.%d", i/256, i%256), emit)
			r.note(e, "ip:192.0.2.1", emit) // one subject past its share
			if len(r.seen) > maxKeys || len(r.open) > maxKeys+2 {
				t.Fatalf("minute %d, request %d: %d subjects counted, %d rollups open", minute, i, len(r.seen), len(r.open))
			}
		}
		counted := emitted
		for _, e := range r.changed(at.Add(time.Duration(minute+1) * time.Minute)) {
			counted += e.Count
		}
		emitted = 0
		if counted != 20_000 {
			t.Fatalf("minute %d: %d answers counted, want 20000", minute, counted)
		}
	}
	// Minutes that are over and written are forgotten.
	r.changed(at.Add(10 * time.Minute))
	if len(r.open) != 0 {
		t.Fatalf("%d rollups of past minutes still open", len(r.open))
	}
}
