package events

import (
	"context"
	"time"
)

// SetCircuitClock makes x's circuits read the time from now.
func SetCircuitClock(x *Outbox, now func() time.Time) { x.circ.now = now }

// FailUnattempted runs the maintenance step that keeps as failed the rows
// that outlived retry_for unattempted.
func FailUnattempted(ctx context.Context, x *Outbox) (int, error) { return x.failUnattempted(ctx) }
