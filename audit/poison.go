package audit

import (
	"context"

	"github.com/jackc/pgx/v5/pgconn"

	"smsgw/otp"
)

// store writes a group to Postgres. A group refused for its data is split
// until the refused rows are alone; those go to the dead letters, and every
// other row is stored.
func (w *Writer) store(ctx context.Context, g group) error {
	var err error
	if g.retry {
		err = Write(ctx, w.pool, g.rows)
	} else {
		var fresh, finals, rollups []otp.AuditEvent
		for _, e := range g.rows {
			switch {
			case g.finals[e.ID]:
				finals = append(finals, e)
			case e.Rollup():
				rollups = append(rollups, e)
			default:
				fresh = append(fresh, e)
			}
		}
		err = writeGroup(ctx, w.pool, fresh, finals, rollups)
	}
	pgErr, bad := refusedData(err)
	if !bad {
		return err
	}
	if len(g.rows) == 1 {
		return w.deadLetter(g.rows[0], pgErr)
	}
	a, b := g.halves()
	if err := w.store(ctx, a); err != nil {
		return err
	}
	return w.store(ctx, b)
}

func (w *Writer) deadLetter(e otp.AuditEvent, pgErr *pgconn.PgError) error {
	if !w.dead.first(e.ID + "\x00" + e.Outcome) {
		return nil
	}
	d := newDeadLetter(e, pgErr)
	w.deadRows.Inc()
	w.log.Error("Postgres refused an audit row for its data; kept in the dead letters, other rows go on",
		"file", w.dead.path, "sqlstate", pgErr.Code, "err", pgErr.Message, "row", d)
	if err := w.dead.keep(d); err != nil {
		// The row is in the log line above, whole; keep going.
		w.log.Error("audit dead letter not written", "err", err)
	}
	return nil
}
