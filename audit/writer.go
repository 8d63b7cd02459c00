// Package audit stores the audit trail in Postgres (and, in dev mode, as JSON
// lines on stderr). A row is durable before its request is answered: in
// Postgres, or while Postgres is slow or down, in a local fsynced spool that
// is replayed into Postgres when it is back.
package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"smsgw/otp"
)

// Options tune a Writer. Zero values pick the defaults.
type Options struct {
	// QueueSize bounds the rows waiting for their batch.
	QueueSize int
	// BatchSize bounds the rows in one write.
	BatchSize int
	// SpoolDir is where rows go while Postgres is slow or down. Empty means
	// no spool: rows then wait for Postgres, and requests with them.
	SpoolDir string
	// SpoolMaxBytes is the spool's cap: at it, Accepting refuses new texts,
	// and 10% more holds the rows of the requests refused meanwhile.
	SpoolMaxBytes int64
	// WriteTimeout is how long a batch waits for Postgres before it goes to
	// the spool instead (default 250ms).
	WriteTimeout time.Duration
	Metrics      prometheus.Registerer
}

// Writer is an otp.AuditLog. Record returns once the row is durable, so a
// request is never answered with a row that a crash could lose. Rows are
// written in groups (group commit): whatever is waiting when a write starts
// shares it, one Postgres commit or one fsync, so waiting costs each request
// a few milliseconds under any load.
//
// In Postgres, a batch is one binary COPY; if it collides with rows already
// stored (a retry after an ambiguous failure, a replayed spool) it is written
// again with ON CONFLICT DO NOTHING, so every row is stored exactly once.
type Writer struct {
	pool  *pgxpool.Pool
	log   *slog.Logger
	opts  Options
	spool *spool

	mu     sync.RWMutex // guards closed against Record sending on a closed queue
	closed bool
	queue  chan pending
	done   chan struct{}
	// giveUp ends waits once Close's deadline has passed.
	giveUp context.Context
	stop   context.CancelFunc

	// modeMu orders switching between Postgres and the spool with the
	// batches written meanwhile: rows never overtake each other.
	modeMu   sync.Mutex
	spooling atomic.Bool // rows go to the spool until it is replayed
	pgReady  atomic.Bool // the schema exists; until then rows are spooled
	drainMu  sync.Mutex  // one replay at a time (the loop's, or Close's)

	written, failed, spooled, replayed, lost prometheus.Counter
	wait                                     prometheus.Histogram
}

type pending struct {
	e    otp.AuditEvent
	done chan error
}

var _ otp.AuditLog = (*Writer)(nil)

// NewWriter starts a Writer, taking over the spool directory and the rows a
// previous run left in it. Close it to flush.
func NewWriter(pool *pgxpool.Pool, opts Options, log *slog.Logger) (*Writer, error) {
	if opts.QueueSize <= 0 {
		opts.QueueSize = 65536
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 1000
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 250 * time.Millisecond
	}
	if opts.SpoolMaxBytes <= 0 {
		opts.SpoolMaxBytes = 1 << 30
	}
	giveUp, stop := context.WithCancel(context.Background())
	w := &Writer{
		pool: pool, log: log, opts: opts,
		queue:  make(chan pending, opts.QueueSize),
		done:   make(chan struct{}),
		giveUp: giveUp, stop: stop,
		written:  prometheus.NewCounter(prometheus.CounterOpts{Name: "smsgw_audit_rows_written_total", Help: "Audit rows stored in Postgres as requests were answered."}),
		failed:   prometheus.NewCounter(prometheus.CounterOpts{Name: "smsgw_audit_write_errors_total", Help: "Audit batches Postgres did not take in time."}),
		spooled:  prometheus.NewCounter(prometheus.CounterOpts{Name: "smsgw_audit_rows_spooled_total", Help: "Audit rows made durable in the local spool."}),
		replayed: prometheus.NewCounter(prometheus.CounterOpts{Name: "smsgw_audit_rows_replayed_total", Help: "Spooled audit rows replayed into Postgres."}),
		lost:     prometheus.NewCounter(prometheus.CounterOpts{Name: "smsgw_audit_rows_lost_total", Help: "Audit rows not stored (no spool and Postgres down through shutdown). Should stay 0."}),
		wait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "smsgw_audit_durable_seconds",
			Help: "How long a request waited for its audit row to be durable.", Buckets: []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1}}),
	}
	w.pgReady.Store(true)
	if opts.SpoolDir != "" {
		sp, err := openSpool(opts.SpoolDir)
		if err != nil {
			return nil, err
		}
		w.spool = sp
		if !sp.empty() {
			w.spooling.Store(true)
			log.Warn("audit spool holds rows from an earlier run; they are replayed into Postgres first", "dir", opts.SpoolDir)
		}
	}
	if opts.Metrics != nil {
		opts.Metrics.MustRegister(w.written, w.failed, w.spooled, w.replayed, w.lost, w.wait,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "smsgw_audit_queue_depth", Help: "Audit rows waiting for their batch."},
				func() float64 { return float64(len(w.queue)) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "smsgw_audit_spooling", Help: "1 while audit rows go to the local spool instead of Postgres."},
				func() float64 { return b2f(w.spooling.Load()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "smsgw_audit_spool_bytes", Help: "Size of the local audit spool."},
				func() float64 { n, _ := w.spoolSize(); return float64(n) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "smsgw_audit_spool_rows", Help: "Rows in the local audit spool (-1: unknown until replayed)."},
				func() float64 { _, n := w.spoolSize(); return float64(n) }),
		)
	}
	go w.run()
	if w.spool != nil {
		go w.replay()
	}
	return w, nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (w *Writer) spoolSize() (int64, int64) {
	if w.spool == nil {
		return 0, 0
	}
	return w.spool.size()
}

// SetPostgresReady says whether the schema is known to exist (migrations
// ran). Until it is, rows are spooled.
func (w *Writer) SetPostgresReady(ready bool) { w.pgReady.Store(ready) }

// PostgresReady reports what SetPostgresReady last said (true at first).
func (w *Writer) PostgresReady() bool { return w.pgReady.Load() }

// ErrClosed is returned by Record after Close.
var ErrClosed = errors.New("audit: writer closed")

// Accepting reports whether requests that may text should go on: at the
// spool's cap it answers ErrSpoolFull, and sends fail closed rather than go
// unaudited.
func (w *Writer) Accepting() error {
	if n, _ := w.spoolSize(); n >= w.opts.SpoolMaxBytes {
		return ErrSpoolFull
	}
	return nil
}

// Record returns once e is durable, in Postgres or in the spool. An error
// means it is not: the request must not be answered.
func (w *Writer) Record(ctx context.Context, e otp.AuditEvent) error {
	start := time.Now()
	p := pending{e: e, done: make(chan error, 1)}
	if err := w.enqueue(ctx, p); err != nil {
		return err
	}
	select {
	case err := <-p.done:
		w.wait.Observe(time.Since(start).Seconds())
		return err
	case <-ctx.Done():
		return fmt.Errorf("audit: row not durable in time: %w", ctx.Err())
	}
}

func (w *Writer) enqueue(ctx context.Context, p pending) error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return ErrClosed
	}
	select {
	case w.queue <- p:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("audit: queue full: %w", ctx.Err())
	}
}

// Close stops accepting rows, makes every queued one durable and stops the
// replay (what is still spooled is replayed at the next start). Without a
// spool, if Postgres stays down past ctx's deadline, it reports the loss.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.queue)
	}
	w.mu.Unlock()
	select {
	case <-w.done:
	case <-ctx.Done():
		w.stop()
		<-w.done
	}
	// Spooled rows are durable already; still, move them into Postgres now
	// if it answers within the deadline, so the next start has none to
	// replay.
	if w.spool != nil && w.spooling.Load() && w.pgReady.Load() && ctx.Err() == nil {
		if err := w.drain(ctx); err != nil {
			w.log.Warn("audit spool left for the next start", "err", err)
		}
	}
	w.stop()
	if w.spool != nil {
		w.modeMu.Lock()
		w.spool.close()
		w.modeMu.Unlock()
	}
	if ctx.Err() != nil && w.spool == nil {
		return fmt.Errorf("audit: shutdown gave up waiting for Postgres: %w", ctx.Err())
	}
	return nil
}

func (w *Writer) run() {
	defer close(w.done)
	batch := make([]pending, 0, w.opts.BatchSize)
	for p := range w.queue {
		// Group commit: take the first row, then whatever else is already
		// waiting. Under load batches grow by themselves; when idle a row is
		// written at once.
		batch = append(batch[:0], p)
	fill:
		for len(batch) < w.opts.BatchSize {
			select {
			case p, ok := <-w.queue:
				if !ok {
					break fill
				}
				batch = append(batch, p)
			default:
				break fill
			}
		}
		err := w.commit(batch)
		for _, p := range batch {
			p.done <- err
		}
	}
}

// commit makes a batch durable: in Postgres when it is answering in time,
// else in the spool, which then takes every row until it is replayed.
func (w *Writer) commit(batch []pending) error {
	events := make([]otp.AuditEvent, len(batch))
	for i, p := range batch {
		events[i] = p.e
	}
	w.modeMu.Lock()
	defer w.modeMu.Unlock()
	if !w.spooling.Load() && w.pgReady.Load() {
		ctx, cancel := context.WithTimeout(w.giveUp, w.opts.WriteTimeout)
		err := Write(ctx, w.pool, events)
		cancel()
		if err == nil {
			w.written.Add(float64(len(events)))
			return nil
		}
		w.failed.Inc()
		if w.spool == nil {
			return w.writeWithRetry(events, err)
		}
		w.log.Error("Postgres did not take audit rows in time; spooling them locally until it does", "rows", len(events), "err", err)
		w.spooling.Store(true)
	}
	if w.spool == nil {
		return w.writeWithRetry(events, errors.New("Postgres not ready"))
	}
	// A batch Postgres took too long for may still commit; its replay then
	// finds the rows stored and skips them.
	if err := w.spool.append(events, w.hardCap()); err != nil {
		w.log.Error("audit rows could not be spooled: their requests go unanswered", "rows", len(events), "err", err)
		return err
	}
	w.spooled.Add(float64(len(events)))
	return nil
}

func (w *Writer) hardCap() int64 { return w.opts.SpoolMaxBytes + w.opts.SpoolMaxBytes/10 + 1<<20 }

// writeWithRetry is the path without a spool: wait for Postgres.
func (w *Writer) writeWithRetry(events []otp.AuditEvent, err error) error {
	backoff := 50 * time.Millisecond
	for {
		if w.giveUp.Err() != nil {
			w.lost.Add(float64(len(events)))
			w.log.Error("audit rows lost: Postgres unreachable at shutdown and no spool", "rows", len(events), "err", err)
			return err
		}
		w.log.Error("audit batch write failed; retrying", "rows", len(events), "retry_in", backoff, "err", err)
		select {
		case <-time.After(backoff):
		case <-w.giveUp.Done():
			continue
		}
		backoff = min(backoff*2, 5*time.Second)
		ctx, cancel := context.WithTimeout(w.giveUp, 10*time.Second)
		err = Write(ctx, w.pool, events)
		cancel()
		if err == nil {
			w.written.Add(float64(len(events)))
			return nil
		}
		w.failed.Inc()
	}
}

// replay moves spooled rows into Postgres, oldest first, whenever Postgres
// answers, and switches back to writing there once the spool is empty.
func (w *Writer) replay() {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-w.giveUp.Done():
			return
		case <-tick.C:
		}
		if !w.spooling.Load() || !w.pgReady.Load() {
			continue
		}
		ctx, cancel := context.WithTimeout(w.giveUp, time.Minute)
		if err := w.drain(ctx); err != nil {
			w.log.Warn("audit spool replay paused", "err", err)
		}
		cancel()
	}
}

func (w *Writer) drain(ctx context.Context) error {
	w.drainMu.Lock()
	defer w.drainMu.Unlock()
	if err := w.pool.Ping(ctx); err != nil {
		return err
	}
	for {
		for _, seq := range w.spool.rotate() {
			events, err := w.spool.read(seq)
			if err != nil {
				w.log.Error("audit spool segment is damaged; moved aside for inspection, its readable rows replayed", "segment", segmentName(seq), "err", err)
			}
			for i := 0; i < len(events); i += w.opts.BatchSize {
				chunk := events[i:min(i+w.opts.BatchSize, len(events))]
				if werr := Insert(ctx, w.pool, chunk); werr != nil {
					return werr
				}
				if werr := applyEarlyReceipts(ctx, w.pool, chunk); werr != nil {
					return werr
				}
			}
			if err != nil {
				if qerr := w.spool.quarantine(seq); qerr != nil {
					return qerr
				}
			} else if err := w.spool.remove(seq, len(events)); err != nil {
				return err
			}
			w.replayed.Add(float64(len(events)))
			w.log.Info("audit spool segment replayed into Postgres", "segment", segmentName(seq), "rows", len(events))
		}
		// Back to Postgres only if nothing was spooled meanwhile; otherwise
		// replay that too first, so rows keep their order.
		w.modeMu.Lock()
		if w.spool.empty() {
			w.spooling.Store(false)
			w.modeMu.Unlock()
			w.log.Info("audit spool replayed; writing to Postgres again")
			return nil
		}
		w.modeMu.Unlock()
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

// Insert stores events in one statement. Rows already stored are skipped, so
// a batch may be written again after an ambiguous failure.
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
		ON CONFLICT DO NOTHING`,
		ids, times, kinds, outcomes, requestIDs, phones, ips, reasons, providers, messageIDs, apiKeys)
	if err != nil {
		return fmt.Errorf("audit: insert %d rows: %w", n, err)
	}
	return nil
}
