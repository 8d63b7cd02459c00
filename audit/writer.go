// Package audit stores the audit trail in Postgres (and, in dev mode, as JSON
// lines on stderr). A row is durable before anything depends on it: in
// Postgres, or while Postgres is slow or down, in a local fsynced spool that
// is replayed into Postgres when it is back.
//
// The Writer is made of parts named for their job: group commit
// (groupcommit.go), the Postgres-or-spool switch (route.go), poison
// isolation (poison.go), waiting for Postgres without a spool (retry.go),
// replay and adoption of spools (replay.go), and the rollups of answers that
// texted nobody (rollup.go). Its loops run in Run, under the caller's
// errgroup; Close writes what is still queued.
package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

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
	// rows such answers make per second, rollups included (default 40);
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
// nobody waits for, and the rows of answers that texted nobody (Note) are
// written in groups by a loop of their own, so they never delay a row
// someone waits for.
//
// In Postgres, first rows go in by one INSERT per group, final outcomes by
// one UPDATE, and anything written again (a retry, a replay, a rollup that
// grew) by one INSERT ... ON CONFLICT, so every row is stored exactly once
// however often it is written (see writeGroup). A row Postgres refuses for
// its data is set apart (the batch is split until it is alone) into the
// dead-letter file, and never holds up another.
type Writer struct {
	pool  *pgxpool.Pool
	log   *slog.Logger
	opts  Options
	spool *spool
	dead  deadLetters
	sw    route
	// rollups counts answers that texted nobody (Note).
	rollups *rollups

	mu     sync.RWMutex // guards closed against Record sending on a closed queue
	closed bool
	// waited are the rows someone waits for; unwaited sends' final outcomes
	// and answers that texted nobody, gathered into larger groups.
	waited, unwaited *committer
	// giveUp ends waits once Close's deadline has passed.
	giveUp context.Context
	stop   context.CancelFunc
	// running is set (under mu) once Run started, endRun ends it, and ran
	// is closed when it has returned.
	running bool
	endRun  context.CancelFunc
	ran     chan struct{}
	// notDurable holds why the last batch could be made durable nowhere;
	// nil once one could.
	notDurable atomic.Pointer[error]

	written, failed, spooled, replayed, lost, deadRows prometheus.Counter
	wait                                               prometheus.Histogram
}

// pending is a row in a committer's queue. The row is held by pointer: a
// channel's buffer is one object the GC scans whole at every cycle, empty
// slots included, and 2 x 65,536 slots of whole rows were 38 MB of the
// live heap, scanned every 130 ms under a flood of refusals: the refused
// path's p99 was those marks. Slots of three words are 3 MB.
type pending struct {
	e     *otp.AuditEvent
	done  chan error // nil when nobody waits
	final bool       // a send's final outcome (Finish)
}

var _ otp.AuditLog = (*Writer)(nil)

// ErrNotDurable means a row could be made durable neither in Postgres nor in
// the spool (a full disk, a read-only or unwritable spool, an I/O error,
// while Postgres is away). The row is kept in memory and tried again.
var ErrNotDurable = errors.New("audit: rows cannot be made durable: neither Postgres nor the spool takes them")

// NewWriter makes a Writer, taking a spool directory of its own under
// SpoolDir with the rows a previous run left in it. It starts nothing: Run
// writes rows, Close writes what is left.
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
		opts.RowsPerSecond = 40
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
		dead:     deadLetters{path: deadLetterPath(opts.SpoolDir)},
		waited:   newCommitter(opts.QueueSize, 0, true),
		unwaited: newCommitter(opts.QueueSize, opts.FinalEvery, false),
		giveUp:   giveUp, stop: stop, ran: make(chan struct{}),
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
	if opts.SpoolDir != "" {
		sp, err := openSpool(opts.SpoolDir)
		if err != nil {
			return nil, err
		}
		w.spool = sp
		if !sp.empty() {
			w.sw.state = toSpool
			log.Warn("audit spool holds rows from an earlier run; they are replayed into Postgres first", "dir", sp.dir)
		}
	}
	if opts.Metrics != nil {
		opts.Metrics.MustRegister(w.written, w.failed, w.spooled, w.replayed, w.lost, w.deadRows, w.wait,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "smsgw_audit_queue_depth", Help: "Audit rows waiting for their batch."},
				func() float64 { return float64(len(w.waited.queue) + len(w.unwaited.queue)) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "smsgw_audit_spooling", Help: "1 while audit rows go to the local spool instead of Postgres."},
				func() float64 { return b2f(w.sw.spooling()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "smsgw_audit_accepting", Help: "1 while audit rows can be made durable; at 0 sends answer 503."},
				func() float64 { return b2f(w.Accepting() == nil) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "smsgw_audit_spool_bytes", Help: "Size of the local audit spool."},
				func() float64 { n, _ := w.spoolSize(); return float64(n) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "smsgw_audit_spool_rows", Help: "Rows in the local audit spool (-1: unknown until replayed)."},
				func() float64 { _, n := w.spoolSize(); return float64(n) }),
		)
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
	p := pending{e: &e, done: make(chan error, 1)}
	if err := w.enqueue(ctx, w.waited, p); err != nil {
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
// sending; it is written in the next group of rows nobody waits for.
func (w *Writer) Finish(e otp.AuditEvent) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.enqueue(ctx, w.unwaited, pending{e: &e, final: true}); err != nil {
		w.lost.Inc()
		w.log.Error("a send's final outcome was not queued; its row stays sending", "id", e.ID, "outcome", e.Outcome, "err", err)
	}
}

func (w *Writer) enqueue(ctx context.Context, c *committer, p pending) error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return ErrClosed
	}
	select {
	case c.queue <- p:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("audit: queue full: %w", ctx.Err())
	}
}

// Run writes rows until ctx ends: the group commits of both queues, the
// replay of the spool and of the spools of replicas that are gone, and the
// rollups every RollupEvery. It returns once its loops have, when ctx ends
// or Close is called; Close then writes what is still queued.
func (w *Writer) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.running || w.closed {
		w.mu.Unlock()
		return errors.New("audit: writer already running or closed")
	}
	ctx, w.endRun = context.WithCancel(ctx)
	w.running = true
	w.mu.Unlock()
	defer close(w.ran)
	var loops sync.WaitGroup
	loops.Go(func() { w.groupCommit(ctx, w.waited) })
	loops.Go(func() { w.groupCommit(ctx, w.unwaited) })
	if w.spool != nil {
		loops.Go(func() { w.replay(ctx) })
	}
	w.rollupLoop(ctx)
	loops.Wait()
	return nil
}

// Close ends Run, stops accepting rows, makes every queued one durable and,
// if Postgres answers in time, replays the spool
// (what is still spooled is replayed at the next start). Without a spool,
// if Postgres stays down past ctx's deadline, it reports the loss.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	running := w.running
	w.mu.Unlock()
	if running {
		w.endRun()
		<-w.ran
	}
	giveUp := context.AfterFunc(ctx, w.stop)
	defer giveUp()
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.waited.queue)
		close(w.unwaited.queue)
	}
	w.mu.Unlock()
	w.writeRest(w.waited)
	w.writeRest(w.unwaited)
	if last := w.rollups.changed(time.Now()); len(last) > 0 {
		if err := w.commit(w.giveUp, group{rows: last}); err != nil {
			w.lost.Add(float64(len(last)))
			w.log.Error("audit rollups lost at shutdown: durable nowhere", "rows", len(last), "err", err)
		}
	}
	// Spooled rows are durable already; still, move them into Postgres now
	// if it answers within the deadline, so the next start has none to
	// replay.
	if w.spool != nil && w.sw.replaying() && ctx.Err() == nil {
		if err := w.drain(ctx); err != nil {
			w.log.Warn("audit spool left for the next start", "err", err)
		}
	}
	w.stop()
	if w.spool != nil {
		w.sw.mu.Lock()
		w.spool.close()
		w.sw.mu.Unlock()
	}
	if ctx.Err() != nil && w.spool == nil {
		return fmt.Errorf("audit: shutdown gave up waiting for Postgres: %w", ctx.Err())
	}
	return nil
}
