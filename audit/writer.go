// Package audit stores the audit trail in Postgres (and, in dev mode, as JSON
// lines). Requests never wait for Postgres: rows are queued and written in
// batches in the background.
package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"smsgw/otp"
)

// Options tune a Writer. Zero values pick the defaults.
type Options struct {
	// QueueSize bounds the rows waiting to be written. When it is full,
	// Record waits (backpressure) rather than drop a row.
	QueueSize int
	// BatchSize bounds the rows in one INSERT.
	BatchSize int
	Metrics   prometheus.Registerer
}

// Writer is an otp.AuditLog writing to Postgres in batches. A batch is one
// binary COPY; if it collides with rows already stored (a retry after an
// ambiguous failure) it is written again with ON CONFLICT (id) DO NOTHING, so
// a row is stored exactly once either way.
type Writer struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	opts Options

	mu     sync.RWMutex // guards closed against Record sending on a closed queue
	closed bool
	queue  chan otp.AuditEvent
	done   chan struct{}
	// giveUp ends retries once Close's deadline has passed.
	giveUp context.Context
	stop   context.CancelFunc

	written prometheus.Counter
	failed  prometheus.Counter
	lost    prometheus.Counter
}

var _ otp.AuditLog = (*Writer)(nil)

// NewWriter starts a Writer. Close it to flush.
func NewWriter(pool *pgxpool.Pool, opts Options, log *slog.Logger) *Writer {
	if opts.QueueSize <= 0 {
		opts.QueueSize = 65536
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 1000
	}
	giveUp, stop := context.WithCancel(context.Background())
	w := &Writer{
		pool: pool, log: log, opts: opts,
		queue:  make(chan otp.AuditEvent, opts.QueueSize),
		done:   make(chan struct{}),
		giveUp: giveUp, stop: stop,
		written: prometheus.NewCounter(prometheus.CounterOpts{Name: "smsgw_audit_rows_written_total", Help: "Audit rows stored in Postgres."}),
		failed:  prometheus.NewCounter(prometheus.CounterOpts{Name: "smsgw_audit_write_errors_total", Help: "Failed audit batch writes (each is retried)."}),
		lost:    prometheus.NewCounter(prometheus.CounterOpts{Name: "smsgw_audit_rows_lost_total", Help: "Audit rows not stored when shutdown gave up waiting for Postgres."}),
	}
	if opts.Metrics != nil {
		opts.Metrics.MustRegister(w.written, w.failed, w.lost,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "smsgw_audit_queue_depth", Help: "Audit rows waiting to be written."},
				func() float64 { return float64(len(w.queue)) }))
	}
	go w.run()
	return w
}

// ErrClosed is returned by Record after Close.
var ErrClosed = errors.New("audit: writer closed")

// Record queues e. It waits only when the queue is full.
func (w *Writer) Record(ctx context.Context, e otp.AuditEvent) error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return ErrClosed
	}
	select {
	case w.queue <- e:
		return nil
	default:
	}
	select {
	case w.queue <- e:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("audit: queue full: %w", ctx.Err())
	}
}

// Close stops accepting rows and writes every queued one. If ctx ends first
// (Postgres down through the whole shutdown) it reports how many were lost.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.queue)
	}
	w.mu.Unlock()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		w.stop()
		<-w.done
		return fmt.Errorf("audit: shutdown gave up waiting for Postgres: %w", ctx.Err())
	}
}

func (w *Writer) run() {
	defer close(w.done)
	batch := make([]otp.AuditEvent, 0, w.opts.BatchSize)
	for e := range w.queue {
		// Group commit: take the first row, then whatever else is already
		// waiting. Under load batches grow by themselves; when idle a row is
		// written at once.
		batch = append(batch[:0], e)
	fill:
		for len(batch) < w.opts.BatchSize {
			select {
			case e, ok := <-w.queue:
				if !ok {
					break fill
				}
				batch = append(batch, e)
			default:
				break fill
			}
		}
		w.writeWithRetry(batch)
	}
}

func (w *Writer) writeWithRetry(batch []otp.AuditEvent) {
	backoff := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(w.giveUp, 10*time.Second)
		err := Write(ctx, w.pool, batch)
		cancel()
		if err == nil {
			w.written.Add(float64(len(batch)))
			return
		}
		w.failed.Inc()
		if w.giveUp.Err() != nil {
			w.lost.Add(float64(len(batch)))
			w.log.Error("audit rows lost: Postgres unreachable at shutdown", "rows", len(batch), "err", err)
			return
		}
		w.log.Error("audit batch write failed; retrying", "rows", len(batch), "retry_in", backoff, "err", err)
		select {
		case <-time.After(backoff):
		case <-w.giveUp.Done():
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

var columns = []string{"id", "created_at", "kind", "outcome", "request_id", "phone_e164", "client_ip", "reason", "provider", "provider_message_id", "api_key"}

// Write stores events, skipping those already stored. The fast path is COPY,
// which cannot skip duplicates; a batch that hits one is rewritten by Insert.
func Write(ctx context.Context, pool *pgxpool.Pool, events []otp.AuditEvent) error {
	_, err := pool.CopyFrom(ctx, pgx.Identifier{"audit_log"}, columns, pgx.CopyFromSlice(len(events), func(i int) ([]any, error) {
		e := events[i]
		var ip *netip.Addr
		if e.ClientIP.IsValid() {
			ip = &e.ClientIP
		}
		return []any{e.ID, e.Time, e.Kind, e.Outcome, e.RequestID, null(e.Phone), ip, null(e.Reason), null(e.Provider), null(e.MessageID), null(e.APIKey)}, nil
	}))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" { // unique_violation: part of the batch is stored
		err = Insert(ctx, pool, events)
	} else if err != nil {
		err = fmt.Errorf("audit: copy %d rows: %w", len(events), err)
	}
	if err != nil {
		return err
	}
	return applyEarlyReceipts(ctx, pool, events)
}

func null(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Insert stores events in one statement. Rows whose id is already stored are
// skipped, so a batch may be written again after an ambiguous failure.
func Insert(ctx context.Context, pool *pgxpool.Pool, events []otp.AuditEvent) error {
	n := len(events)
	ids := make([]string, n)
	times := make([]time.Time, n)
	kinds := make([]string, n)
	outcomes := make([]string, n)
	requestIDs := make([]string, n)
	phones := make([]string, n)
	ips := make([]string, n)
	reasons := make([]string, n)
	providers := make([]string, n)
	messageIDs := make([]string, n)
	apiKeys := make([]string, n)
	for i, e := range events {
		ids[i], times[i], kinds[i], outcomes[i], requestIDs[i] = e.ID, e.Time, e.Kind, e.Outcome, e.RequestID
		phones[i], reasons[i], providers[i], messageIDs[i], apiKeys[i] = e.Phone, e.Reason, e.Provider, e.MessageID, e.APIKey
		if e.ClientIP.IsValid() {
			ips[i] = e.ClientIP.String()
		}
	}
	_, err := pool.Exec(ctx, `
		INSERT INTO audit_log (id, created_at, kind, outcome, request_id, phone_e164, client_ip, reason, provider, provider_message_id, api_key)
		SELECT id, created_at, kind, outcome, request_id,
		       NULLIF(phone, ''), NULLIF(ip, '')::inet, NULLIF(reason, ''), NULLIF(provider, ''), NULLIF(message_id, ''), NULLIF(api_key, '')
		FROM unnest($1::uuid[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[])
		     AS t(id, created_at, kind, outcome, request_id, phone, ip, reason, provider, message_id, api_key)
		ON CONFLICT (id) DO NOTHING`,
		ids, times, kinds, outcomes, requestIDs, phones, ips, reasons, providers, messageIDs, apiKeys)
	if err != nil {
		return fmt.Errorf("audit: insert %d rows: %w", n, err)
	}
	return nil
}
