// Package audit stores the audit trail in Postgres (and, in dev mode, as JSON
// lines on stderr). A row is durable before anything depends on it: in
// Postgres, or while Postgres is slow or down, in a local fsynced spool that
// is replayed into Postgres when it is back.
package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"smsgw/otp"
)

// Options tune a Writer. Zero values pick the defaults.
type Options struct {
	// QueueSize bounds the rows waiting for their batch, and the rows kept
	// in memory while neither Postgres nor the spool takes any.
	QueueSize int
	// BatchSize bounds the rows in one write.
	BatchSize int
	// SpoolDir is where rows go while Postgres is slow or down: each Writer
	// takes a directory of its own under it. Empty means no spool: rows then
	// wait for Postgres, and requests with them.
	SpoolDir string
	// SpoolMaxBytes is the spool's cap: at it, Accepting refuses new texts,
	// and 10% more holds the rows of the requests refused meanwhile.
	SpoolMaxBytes int64
	// WriteTimeout is how long a batch waits for Postgres before it goes to
	// the spool instead (default 250ms).
	WriteTimeout time.Duration
	// RetryEvery is how often rows that could not be made durable are tried
	// again (default 200ms), and AdoptEvery how often the spools of replicas
	// that are gone are looked for (default 5s).
	RetryEvery time.Duration
	AdoptEvery time.Duration
	// FinalEvery is how long sends' final outcomes gather before they are
	// written (default 50ms): fewer, larger groups cost Postgres about half
	// as much per row (`make bench-http`), and a row reads "sending" that
	// much longer after its answer.
	FinalEvery time.Duration
	// RowsPerSubjectMinute is how many answers that texted nobody have a
	// row of their own per subject and minute (default 20); the rest of the
	// minute are counted on the subject's rollup. RowsPerSecond bounds the
	// rows such answers make per second, rollups included (default 200);
	// past it they fold per (kind, outcome, reason, minute).
	RowsPerSubjectMinute int
	RowsPerSecond        int
	// RollupEvery is how often changed rollups are written (default 1s):
	// what a crash may lose of the answers that texted nobody.
	RollupEvery time.Duration
	// RollupKeys bounds the subjects counted per minute and the open
	// rollups (default 100000 each): past it, answers fold wider, so a flood
	// of new subjects costs bounded memory.
	RollupKeys int
	Metrics    prometheus.Registerer
}

// Writer is an otp.AuditLog. Record returns once the row is durable, so a
// request is never answered with a row that a crash could lose. Rows are
// written in groups (group commit): whatever is waiting when a write starts
// shares it, one Postgres commit or one fsync, so waiting costs each request
// a few milliseconds under any load. Sends' final outcomes (Finish), which
// nobody waits for, are written in groups by a loop of their own (batched
// finalisation), so they never delay a row someone waits for, and are in
// Postgres a write after their answer.
//
// In Postgres, first rows go in by one INSERT per group, final outcomes by
// one UPDATE, and anything written again (a retry, a replay) by one
// INSERT ... ON CONFLICT, so every row is stored exactly once however often
// it is written (see writeGroup). A row Postgres refuses for its data is set
// apart (the batch is split until it is alone) into the dead-letter file, and
// never holds up another.
type Writer struct {
	pool  *pgxpool.Pool
	log   *slog.Logger
	opts  Options
	spool *spool
	dead  deadLetters
	// rollups counts answers that texted nobody (Note).
	rollups *rollups

	mu     sync.RWMutex // guards closed against Record sending on a closed queue
	closed bool
	queue  chan pending // rows someone waits for
	done   chan struct{}
	// finals are sends' final outcomes, which nobody waits for: written by
	// a loop of their own, in larger groups, so they never delay a row
	// someone waits for.
	finals     chan pending
	finalsDone chan struct{}
	// giveUp ends waits once Close's deadline has passed.
	giveUp context.Context
	stop   context.CancelFunc
	loops  sync.WaitGroup

	// modeMu orders switching back from the spool to Postgres (held to
	// write) with the groups written meanwhile (held to read).
	modeMu   sync.RWMutex
	spooling atomic.Bool // rows go to the spool until it is replayed
	pgReady  atomic.Bool // the schema exists; until then rows are spooled
	drainMu  sync.Mutex  // one replay at a time (the loop's, or Close's)
	// notDurable holds why the last batch could be made durable nowhere;
	// nil once one could.
	notDurable atomic.Pointer[error]

	written, failed, spooled, replayed, lost, deadRows prometheus.Counter
	wait                                               prometheus.Histogram
}

type pending struct {
	e     otp.AuditEvent
	done  chan error // nil for Finish: nobody waits
	final bool       // a send's final outcome (Finish)
}

// group is what one write takes: the rows, which of them are sends' final
// outcomes, and whether they were tried before (any may be stored already).
type group struct {
	rows   []otp.AuditEvent
	finals map[string]bool
	retry  bool
}

// halves splits a group, keeping what is known of its rows.
func (g group) halves() (group, group) {
	n := len(g.rows) / 2
	return group{rows: g.rows[:n], finals: g.finals, retry: g.retry}, group{rows: g.rows[n:], finals: g.finals, retry: g.retry}
}

var _ otp.AuditLog = (*Writer)(nil)

// ErrNotDurable means a row could be made durable neither in Postgres nor in
// the spool (a full disk, a read-only or unwritable spool, an I/O error,
// while Postgres is away). The row is kept in memory and tried again.
var ErrNotDurable = errors.New("audit: rows cannot be made durable: neither Postgres nor the spool takes them")

// NewWriter starts a Writer, taking a spool directory of its own under
// SpoolDir with the rows a previous run left in it. Close it to flush.
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
	if opts.RetryEvery <= 0 {
		opts.RetryEvery = 200 * time.Millisecond
	}
	if opts.AdoptEvery <= 0 {
		opts.AdoptEvery = 5 * time.Second
	}
	if opts.FinalEvery <= 0 {
		opts.FinalEvery = 50 * time.Millisecond
	}
	if opts.RowsPerSubjectMinute <= 0 {
		opts.RowsPerSubjectMinute = 20
	}
	if opts.RowsPerSecond <= 0 {
		opts.RowsPerSecond = 200
	}
	if opts.RollupEvery <= 0 {
		opts.RollupEvery = time.Second
	}
	if opts.RollupKeys <= 0 {
		opts.RollupKeys = 100000
	}
	giveUp, stop := context.WithCancel(context.Background())
	w := &Writer{
		pool: pool, log: log, opts: opts,
		dead:   deadLetters{path: deadLetterPath(opts.SpoolDir)},
		queue:  make(chan pending, opts.QueueSize),
		done:   make(chan struct{}),
		finals: make(chan pending, opts.QueueSize), finalsDone: make(chan struct{}),
		giveUp: giveUp, stop: stop,
		rollups:  newRollups(opts.RowsPerSubjectMinute, opts.RowsPerSecond, opts.RollupKeys),
		written:  prometheus.NewCounter(prometheus.CounterOpts{Name: "smsgw_audit_rows_written_total", Help: "Audit rows stored in Postgres as requests were answered."}),
		failed:   prometheus.NewCounter(prometheus.CounterOpts{Name: "smsgw_audit_write_errors_total", Help: "Audit batches Postgres did not take in time."}),
		spooled:  prometheus.NewCounter(prometheus.CounterOpts{Name: "smsgw_audit_rows_spooled_total", Help: "Audit rows made durable in the local spool."}),
		replayed: prometheus.NewCounter(prometheus.CounterOpts{Name: "smsgw_audit_rows_replayed_total", Help: "Spooled audit rows replayed into Postgres (own spool and adopted ones)."}),
		lost:     prometheus.NewCounter(prometheus.CounterOpts{Name: "smsgw_audit_rows_lost_total", Help: "Audit rows not stored (durable nowhere through shutdown, or past the memory bound while nothing was durable). Should stay 0."}),
		deadRows: prometheus.NewCounter(prometheus.CounterOpts{Name: "smsgw_audit_rows_dead_lettered_total", Help: "Audit rows Postgres refused for their data, kept in the dead-letter file."}),
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
			log.Warn("audit spool holds rows from an earlier run; they are replayed into Postgres first", "dir", sp.dir)
		}
	}
	if opts.Metrics != nil {
		opts.Metrics.MustRegister(w.written, w.failed, w.spooled, w.replayed, w.lost, w.deadRows, w.wait,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "smsgw_audit_queue_depth", Help: "Audit rows waiting for their batch."},
				func() float64 { return float64(len(w.queue) + len(w.finals)) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "smsgw_audit_spooling", Help: "1 while audit rows go to the local spool instead of Postgres."},
				func() float64 { return b2f(w.spooling.Load()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "smsgw_audit_accepting", Help: "1 while audit rows can be made durable; at 0 sends answer 503."},
				func() float64 { return b2f(w.Accepting() == nil) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "smsgw_audit_spool_bytes", Help: "Size of the local audit spool."},
				func() float64 { n, _ := w.spoolSize(); return float64(n) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "smsgw_audit_spool_rows", Help: "Rows in the local audit spool (-1: unknown until replayed)."},
				func() float64 { _, n := w.spoolSize(); return float64(n) }),
		)
	}
	go w.run(w.queue, w.done, 0, true)
	go w.run(w.finals, w.finalsDone, w.opts.FinalEvery, false)
	if w.spool != nil {
		w.loops.Add(1)
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

// Accepting reports whether requests that may text should go on: while rows
// can be made durable nowhere it answers ErrNotDurable, at the spool's cap
// ErrSpoolFull, and sends fail closed rather than go unaudited. It is also
// the readiness check named "audit".
func (w *Writer) Accepting() error {
	if err := w.notDurable.Load(); err != nil {
		return *err
	}
	if n, _ := w.spoolSize(); n >= w.opts.SpoolMaxBytes {
		return ErrSpoolFull
	}
	return nil
}

// Ready is Accepting as a readiness check.
func (w *Writer) Ready(context.Context) error { return w.Accepting() }

// Record returns once e is durable, in Postgres or in the spool. An error
// means it is not (the row is still kept in memory and tried again): the
// request must not claim it is.
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

// Finish queues a send's final outcome, its row being durable already as
// sending; it is written in the next group of final outcomes, nobody
// waiting.
func (w *Writer) Finish(e otp.AuditEvent) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.enqueue(ctx, pending{e: e, final: true}); err != nil {
		w.lost.Inc()
		w.log.Error("a send's final outcome was not queued; its row stays sending", "id", e.ID, "outcome", e.Outcome, "err", err)
	}
}

func (w *Writer) enqueue(ctx context.Context, p pending) error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return ErrClosed
	}
	queue := w.queue
	if p.final {
		queue = w.finals
	}
	select {
	case queue <- p:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("audit: queue full: %w", ctx.Err())
	}
}

// Note records an answer that texted nobody and changed no code, without
// waiting: a row of its own while its subject has had fewer than
// RowsPerSubjectMinute this minute and the replica fewer than RowsPerSecond
// this second, else a count on a rollup, written by Run within RollupEvery.
func (w *Writer) Note(e otp.AuditEvent, subject string) {
	w.rollups.note(e, subject, w.offer)
}

// offer queues a row nobody waits for if there is room right now.
func (w *Writer) offer(e otp.AuditEvent) bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return false
	}
	select {
	case w.finals <- pending{e: e}:
		return true
	default:
		return false
	}
}

// Run writes the rollups that changed every RollupEvery until ctx ends,
// then once more.
func (w *Writer) Run(ctx context.Context) error {
	tick := time.NewTicker(w.opts.RollupEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return w.flushRollups(context.Background())
		case <-tick.C:
			if err := w.flushRollups(ctx); err != nil {
				w.log.Warn("audit rollups not queued; kept for the next flush", "err", err)
			}
		}
	}
}

// flushRollups queues the rollups that changed since the last flush,
// waiting at most RollupEvery for room; those the queue does not take are
// kept for the next.
func (w *Writer) flushRollups(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, w.opts.RollupEvery)
	defer cancel()
	changed := w.rollups.changed(time.Now())
	for i, e := range changed {
		if err := w.enqueue(ctx, pending{e: e}); err != nil {
			w.rollups.retry(changed[i:])
			return err
		}
	}
	return nil
}

// Close stops accepting rows, makes every queued one durable and stops the
// replay (what is still spooled is replayed at the next start). Without a
// spool, if Postgres stays down past ctx's deadline, it reports the loss.
func (w *Writer) Close(ctx context.Context) error {
	if err := w.flushRollups(ctx); err != nil && !errors.Is(err, ErrClosed) {
		w.lost.Inc()
		w.log.Error("audit rollups not queued at shutdown", "err", err)
	}
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.queue)
		close(w.finals)
	}
	w.mu.Unlock()
	for _, done := range []chan struct{}{w.done, w.finalsDone} {
		select {
		case <-done:
		case <-ctx.Done():
			w.stop()
			<-done
		}
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
	w.loops.Wait()
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

// run writes the rows of one queue in groups until it is closed: a group is
// what is waiting when a write starts, after gathering for linger if it is
// positive. The loop of rows someone waits for (waited) also says whether
// rows can be made durable (Accepting).
func (w *Writer) run(queue <-chan pending, done chan struct{}, linger time.Duration, waited bool) {
	defer close(done)
	// backlog holds rows that could be made durable nowhere (their waiters
	// were told); they go first in every later write.
	var backlog []otp.AuditEvent
	retry := time.NewTicker(w.opts.RetryEvery)
	defer retry.Stop()
	batch := make([]pending, 0, w.opts.BatchSize)
	for {
		batch = batch[:0]
		select {
		case p, ok := <-queue:
			if !ok {
				w.lastTry(backlog)
				return
			}
			batch = append(batch, p)
		case <-retry.C:
			if len(backlog) == 0 {
				continue
			}
		}
		if linger > 0 {
			batch = gather(queue, batch, w.opts.BatchSize, linger)
		}
		// Group commit: take the first row, then whatever else is already
		// waiting. Under load batches grow by themselves; when idle a row is
		// written at once.
	fill:
		for len(batch) < w.opts.BatchSize {
			select {
			case p, ok := <-queue:
				if !ok {
					break fill
				}
				batch = append(batch, p)
			default:
				break fill
			}
		}
		g := group{rows: make([]otp.AuditEvent, len(backlog), len(backlog)+len(batch)), retry: len(backlog) > 0}
		copy(g.rows, backlog)
		for _, p := range batch {
			g.rows = append(g.rows, p.e)
			if p.final {
				if g.finals == nil {
					g.finals = map[string]bool{}
				}
				g.finals[p.e.ID] = true
			}
		}
		err := w.commit(g)
		if err == nil {
			if len(backlog) > 0 {
				w.log.Info("audit rows are durable again", "kept_rows", len(backlog))
			}
			backlog = nil
			if waited {
				w.notDurable.Store(nil)
			}
		} else {
			backlog = w.bound(g.rows)
			if waited {
				w.notDurable.Store(&err)
			}
		}
		for _, p := range batch {
			if p.done != nil {
				p.done <- err
			}
		}
	}
}

// gather adds rows to batch until it is full or linger has passed.
func gather(queue <-chan pending, batch []pending, size int, linger time.Duration) []pending {
	timer := time.NewTimer(linger)
	defer timer.Stop()
	for len(batch) < size {
		select {
		case p, ok := <-queue:
			if !ok {
				return batch
			}
			batch = append(batch, p)
		case <-timer.C:
			return batch
		}
	}
	return batch
}

// bound keeps at most QueueSize rows waiting in memory, the newest.
func (w *Writer) bound(events []otp.AuditEvent) []otp.AuditEvent {
	if over := len(events) - w.opts.QueueSize; over > 0 {
		w.lost.Add(float64(over))
		w.log.Error("audit rows lost: durable nowhere for too long, past the memory bound", "rows", over)
		events = events[over:]
	}
	return events
}

// lastTry writes what is still kept in memory, once more, at Close.
func (w *Writer) lastTry(backlog []otp.AuditEvent) {
	if len(backlog) == 0 {
		return
	}
	if err := w.commit(group{rows: backlog, retry: true}); err != nil {
		w.lost.Add(float64(len(backlog)))
		w.log.Error("audit rows lost at shutdown: durable nowhere", "rows", len(backlog), "err", err)
	}
}

// commit makes a batch durable: in Postgres when it is answering in time,
// else in the spool, which then takes every row until it is replayed. When
// the spool cannot take them either, Postgres is asked once more (it may be
// back before the replay noticed); past that the batch is not durable.
func (w *Writer) commit(g group) error {
	w.modeMu.RLock()
	defer w.modeMu.RUnlock()
	triedPostgres := false
	if !w.spooling.Load() && w.pgReady.Load() {
		triedPostgres = true
		err := w.timed(g)
		if err == nil {
			return nil
		}
		if w.spool == nil {
			return w.writeWithRetry(g, err)
		}
		w.log.Error("Postgres did not take audit rows in time; spooling them locally until it does", "rows", len(g.rows), "err", err)
		w.spooling.Store(true)
	}
	if w.spool == nil {
		return w.writeWithRetry(g, errors.New("postgres not ready"))
	}
	// A batch Postgres took too long for may still commit; its replay then
	// finds the rows stored and skips them.
	err := w.spool.append(g.rows, w.hardCap())
	if err == nil {
		w.spooled.Add(float64(len(g.rows)))
		return nil
	}
	if !triedPostgres && w.pgReady.Load() && w.timed(g) == nil {
		return nil
	}
	w.log.Error("audit rows are durable nowhere: sends answer 503 until Postgres or the spool takes rows again", "rows", len(g.rows), "err", err)
	return fmt.Errorf("%w: %w", ErrNotDurable, err)
}

// timed stores a group in Postgres within the write timeout.
func (w *Writer) timed(g group) error {
	ctx, cancel := context.WithTimeout(w.giveUp, w.opts.WriteTimeout)
	defer cancel()
	if err := w.store(ctx, g); err != nil {
		w.failed.Inc()
		return err
	}
	w.written.Add(float64(len(g.rows)))
	return nil
}

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

func (w *Writer) hardCap() int64 { return w.opts.SpoolMaxBytes + w.opts.SpoolMaxBytes/10 + 1<<20 }

// writeWithRetry is the path without a spool: wait for Postgres.
func (w *Writer) writeWithRetry(g group, err error) error {
	events := g.rows
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
		err = w.store(ctx, group{rows: events, retry: true})
		cancel()
		if err == nil {
			w.written.Add(float64(len(events)))
			return nil
		}
		w.failed.Inc()
	}
}

// replay moves spooled rows into Postgres, oldest first, whenever Postgres
// answers, and switches back to writing there once the spool is empty. Now
// and then it adopts the spools of replicas that are gone.
func (w *Writer) replay() {
	defer w.loops.Done()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	adopt := time.NewTicker(w.opts.AdoptEvery)
	defer adopt.Stop()
	w.adoptOrphans() // a replica may have died while none was running
	for {
		select {
		case <-w.giveUp.Done():
			return
		case <-adopt.C:
			w.adoptOrphans()
			continue
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

// drain replays the own spool and goes back to writing to Postgres.
func (w *Writer) drain(ctx context.Context) error {
	w.drainMu.Lock()
	defer w.drainMu.Unlock()
	if err := w.pool.Ping(ctx); err != nil {
		return err
	}
	for pass := 0; ; pass++ {
		if err := w.replaySegments(ctx, w.spool); err != nil {
			return err
		}
		// Back to Postgres only if nothing was spooled meanwhile; otherwise
		// replay that too first. Under steady load something always was:
		// after a few passes the rest is replayed with the writers held, so
		// the switch cannot be put off for ever (it holds them for what
		// arrived during one pass).
		w.modeMu.Lock()
		if !w.spool.empty() && pass >= 2 {
			if err := w.replaySegments(ctx, w.spool); err != nil {
				w.modeMu.Unlock()
				return err
			}
		}
		if w.spool.empty() {
			w.spooling.Store(false)
			w.modeMu.Unlock()
			w.log.Info("audit spool replayed; writing to Postgres again")
			return nil
		}
		w.modeMu.Unlock()
	}
}

// replaySegments moves every closed segment of sp into Postgres, oldest
// first, and deletes it.
func (w *Writer) replaySegments(ctx context.Context, sp *spool) error {
	for _, seq := range sp.rotate() {
		events, err := sp.read(seq)
		if err != nil {
			w.log.Error("audit spool segment is damaged; moved aside for inspection, its readable rows replayed", "segment", segmentName(seq), "dir", sp.dir, "err", err)
		}
		for i := 0; i < len(events); i += w.opts.BatchSize {
			if werr := w.store(ctx, group{rows: events[i:min(i+w.opts.BatchSize, len(events))], retry: true}); werr != nil {
				return werr
			}
		}
		if err != nil {
			if qerr := sp.quarantine(seq); qerr != nil {
				return qerr
			}
		} else if err := sp.remove(seq, len(events)); err != nil {
			return err
		}
		w.replayed.Add(float64(len(events)))
		w.log.Info("audit spool segment replayed into Postgres", "segment", segmentName(seq), "dir", sp.dir, "rows", len(events))
	}
	return nil
}

// adoptOrphans replays the spools no live process holds: a replica that
// died leaves its rows to whichever replica on the host looks first.
func (w *Writer) adoptOrphans() {
	if !w.pgReady.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(w.giveUp, 5*time.Second)
	err := w.pool.Ping(ctx)
	cancel()
	if err != nil {
		return // Postgres is away: orphaned rows are safe where they are
	}
	for _, dir := range orphans(w.opts.SpoolDir, w.spool.dir) {
		sp, err := lockSpool(dir)
		if err != nil || sp == nil {
			continue
		}
		if !sp.empty() {
			w.log.Warn("adopting the audit spool of a replica that is gone", "dir", dir)
			ctx, cancel := context.WithTimeout(w.giveUp, time.Minute)
			if err := w.replaySegments(ctx, sp); err != nil {
				w.log.Warn("adopted audit spool left for later", "dir", dir, "err", err)
			} else {
				w.log.Info("adopted audit spool replayed", "dir", dir)
			}
			cancel()
		}
		sp.close()
	}
}
