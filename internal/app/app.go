// Package app is smsgw's composition root: the one place where a
// configuration becomes a running service. cmd/smsgw, the tests and the
// benchmarks all build the service here, so the wiring exists once.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"smsgw/api"
	"smsgw/audit"
	"smsgw/challenge"
	"smsgw/console"
	"smsgw/events"
	"smsgw/internal/redisconn"
	"smsgw/otp"
	"smsgw/pumping"
	"smsgw/sender"
	"smsgw/sender/fake"
	"smsgw/verification"
)

// Secrets come from the environment only, never from the config file.
type Secrets struct {
	Code        string // SMSGW_SECRET
	AdminToken  string // SMSGW_ADMIN_TOKEN
	TwilioSID   string // TWILIO_ACCOUNT_SID
	TwilioToken string // TWILIO_AUTH_TOKEN
	HTTPSecret  string // SMSGW_HTTP_SECRET
	Challenge   string // SMSGW_CHALLENGE_SECRET
}

// SecretsFrom reads the secrets from the environment.
func SecretsFrom(getenv func(string) string) Secrets {
	return Secrets{Code: getenv("SMSGW_SECRET"), AdminToken: getenv("SMSGW_ADMIN_TOKEN"),
		TwilioSID: getenv("TWILIO_ACCOUNT_SID"), TwilioToken: getenv("TWILIO_AUTH_TOKEN"), HTTPSecret: getenv("SMSGW_HTTP_SECRET"),
		Challenge: getenv("SMSGW_CHALLENGE_SECRET")}
}

// Deps are what the process around the service supplies. Zero values build
// the real thing from the configuration.
type Deps struct {
	Log     *slog.Logger         // nil: discard
	Metrics *prometheus.Registry // nil: a new registry with the Go and process collectors
	// Redis, when set, is used instead of connecting as [redis] says; its
	// owner closes it.
	Redis redis.UniversalClient
	// AuditLog, when set, takes the audit rows instead of Postgres, and no
	// Postgres is used at all.
	AuditLog otp.AuditLog
	// Providers, when set, replace the configured SMS providers.
	Providers []sender.Named
	// Dev runs over in-process stand-ins for Redis and Postgres (see dev.go),
	// printing texts and audit rows to Stderr.
	Dev    bool
	Stderr io.Writer
}

// App is the service, built and ready to Run.
type App struct {
	cfg     *Config
	log     *slog.Logger
	Service *otp.Service
	Handler *api.Server
	// Outbox is the fake provider's, nil unless "fake" is configured.
	Outbox *fake.Provider
	// Guard is the pumping guard: with its rules off it still keeps the
	// operators' overrides and the spend ceiling.
	Guard *pumping.Guard
	Redis redis.UniversalClient
	// Events is the webhook outbox; nil without Postgres.
	Events *events.Outbox

	providers []string
	ln        net.Listener
	srv       *http.Server
	// loops run under Run's errgroup, from start to shutdown.
	loops []loop
	// stops undo what New started, last first and once (stop): the audit
	// writer's flush before the pool it writes to, clients after the parts
	// that use them. Run ends with them once the server and the loops have
	// stopped; Close runs them if Run never did.
	stops    []func(ctx context.Context) error
	stopOnce sync.Once
	stopErr  error
}

// loop is a background task that runs until its context ends.
type loop struct {
	name string
	run  func(ctx context.Context) error
}

// New validates cfg and the secrets, then connects and wires every part, and
// listens on server.listen. Nothing is served until Run.
func New(ctx context.Context, cfg *Config, sec Secrets, d Deps) (_ *App, err error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Stderr == nil {
		d.Stderr = io.Discard
	}
	if d.Metrics == nil {
		d.Metrics = prometheus.NewRegistry()
		d.Metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	log := d.Log
	if d.Dev {
		if cfg, err = devConfig(cfg); err != nil {
			return nil, err
		}
	} else if cfg = fakeShadow(cfg); cfg.shadowedForFake {
		log.Info(fakeShadowNote)
	}
	a := &App{cfg: cfg, log: log}
	defer func() {
		if err != nil {
			a.Close()
		}
	}()

	// Secrets and provider settings first: a bad one stops the start before
	// anything is created or changed.
	if d.Dev {
		if sec.Code == "" {
			sec.Code = otp.RandomSecret()
			log.Warn("SMSGW_SECRET is not set: using a random one; pending codes die with this process")
		}
	}
	if sec.Code == "" {
		return nil, fmt.Errorf("SMSGW_SECRET: must be set (at least %d random characters, e.g. `openssl rand -hex 32`); it keys the codes at rest", otp.MinSecretLength)
	}
	codeKeys, err := otp.NewSecrets(sec.Code)
	if err != nil {
		return nil, fmt.Errorf("SMSGW_SECRET: %w", err)
	}
	if !d.Dev {
		if err := checkProviderNamed(cfg); err != nil {
			return nil, err
		}
	}
	challengeCfg := cfg.challenge(sec.Challenge)
	if err := challengeCfg.Validate(); err != nil {
		return nil, err
	}
	var onText func(fake.Message)
	if d.Dev {
		onText = func(m fake.Message) { fmt.Fprintf(d.Stderr, "DEV text to %s: %q\n", m.To, m.Body) }
	}
	prov, err := buildProviders(cfg, sec, onText)
	if err != nil {
		return nil, err
	}
	if d.Providers != nil {
		prov = providers{named: d.Providers}
	}
	warnLongTexts(cfg, log)

	if d.Dev {
		if d.Redis, err = a.startDev(d.Stderr); err != nil {
			return nil, err
		}
		d.AuditLog = audit.NewJSONLines(d.Stderr)
	}
	rdb := d.Redis
	if rdb == nil {
		if rdb, err = redisconn.New(cfg.redis()); err != nil {
			return nil, err
		}
		a.onClose(func() { rdb.Close() })
		if err := rdb.Ping(ctx).Err(); err != nil {
			log.Warn("redis is not answering; sends answer 503 until it does", "err", err)
		}
	}
	a.Redis = rdb
	checks := []api.Check{{Name: "redis", Check: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }}}

	auditLog, auditReader := d.AuditLog, otp.AuditReader(otp.NoAuditQueries{})
	var deliveries otp.DeliveryLog
	var auditSearch console.Audit
	var verifications otp.Verifications // nil: none kept (no Postgres)
	var pgParts consoleParts            // the console's parts in Postgres
	if auditLog == nil {
		pg, err := a.startPostgres(ctx, d.Metrics)
		if err != nil {
			return nil, err
		}
		reader := audit.NewReader(pg.pool)
		auditLog, auditReader, auditSearch = pg.writer, reader, reader
		store, outbox := a.startEvents(pg.pool, d.Metrics, log)
		verifications, a.Events = store, outbox
		pgParts.verifications, pgParts.events = store, outbox
		deliveries = verification.Receipts{Audit: audit.NewDeliveries(pg.pool), Store: store}
		checks = append(checks, api.Check{Name: "postgres", Check: pg.pool.Ping},
			// Rows can be made durable somewhere (Postgres or the spool).
			api.Check{Name: "audit", Check: pg.writer.Ready})
	}

	st, err := a.redisState(cfg, rdb, log, d.Metrics)
	if err != nil {
		return nil, err
	}
	if a.Events != nil {
		a.loops = append(a.loops, loop{"pumping events", func(ctx context.Context) error {
			return a.Events.WatchPumping(ctx, st.guard, max(5*time.Second, cfg.Events.Poll.Duration))
		}})
	}
	var verifier otp.ChallengeVerifier = otp.NoChallenge{}
	if challengeCfg.On() {
		verifier = challenge.New(challengeCfg, nil, d.Metrics)
	}
	router, err := newRouter(cfg, prov.named, d.Metrics)
	if err != nil {
		return nil, err
	}
	a.providers = router.Providers()
	a.Service = otp.NewService(cfg.domain(), otp.Deps{
		Limiter:     st.limits,
		Sender:      router,
		Codes:       st.codes,
		Idempotency: st.idempotency,
		AuditLog:    auditLog,
		Admitter:    st.admitter,
		Pumping:     st.guard,
		Overrides:   st.guard,
		Challenge:   verifier,
		Secrets:     codeKeys,
		Messages:    cfg.messages,
		// otp keeps its own cache of parsed numbers.
		Verifications: verifications,
	}, log)

	// Providers bring their own endpoints; the API mounts them.
	var endpoints []otp.Endpoint
	var warnings []string
	if prov.outbox != nil {
		a.Outbox = prov.outbox
		ep := prov.outbox.Outbox(cfg.Phone.DefaultRegion)
		// Outside -dev the outbox holds real people's codes: admins only.
		ep.Admin = !d.Dev
		endpoints = append(endpoints, ep)
		if !d.Dev {
			warnings = append(warnings, fakeWarning)
			log.Warn(fakeWarning)
		}
	}
	if prov.twilio != nil && deliveries != nil {
		if ep, ok := prov.twilio.Receipts(deliveries, log, d.Metrics); ok {
			endpoints = append(endpoints, ep)
		}
	}
	failures := otp.NewAuthFailures(adminFailuresMax, adminFailuresWindow, cfg.Limits.IPv6Prefix)
	endpoints = append(endpoints, consoleEndpoints(cfg, sec.AdminToken, a.Service, consoleParts{codes: st.codes, audit: auditSearch,
		auditLog: auditLog, pumping: st.guard, failures: failures, metrics: d.Metrics, warnings: warnings,
		verifications: pgParts.verifications, events: pgParts.events}, log)...)
	a.Handler = api.NewServer(log, api.Config{
		TrustedProxies: cfg.trustedProxies,
		DefaultRegion:  cfg.Phone.DefaultRegion,
		AdminToken:     sec.AdminToken,
		MaxAttempts:    cfg.OTP.MaxAttempts,
		APIKeys:        cfg.apiKeys,
		CORSOrigins:    cfg.corsOrigins,
		Warnings:       warnings,
	}, api.Deps{Service: a.Service, AuditLog: auditLog, AuditReader: auditReader, Pumping: st.guard,
		Checks: checks, Metrics: d.Metrics, Endpoints: endpoints, AdminFailures: failures})

	a.ln, err = net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return nil, fmt.Errorf("server.listen: %w", err)
	}
	a.onClose(func() { a.ln.Close() })
	a.srv = &http.Server{
		Handler:           a.Handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	return a, nil
}

// Addr is the address the service listens on.
func (a *App) Addr() string { return a.ln.Addr().String() }

// Run serves HTTP and runs every background loop until ctx ends or the
// server fails, then shuts down in order: stop taking requests, finish
// in-flight ones (within server.shutdown_timeout), stop the loops and wait
// for them (the Redis pipelines in flight among them), make every queued
// audit row durable, then close what New opened (stop).
func (a *App) Run(ctx context.Context) error {
	// The loops outlive ctx: in-flight requests still use them while the
	// server drains.
	loopCtx, stopLoops := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLoops()
	g, gctx := errgroup.WithContext(loopCtx)
	for _, l := range a.loops {
		g.Go(func() error {
			if err := l.run(gctx); err != nil && gctx.Err() == nil {
				a.log.Error(l.name+" stopped", "err", err)
			}
			return nil
		})
	}
	served := make(chan error, 1)
	g.Go(func() error {
		if err := a.srv.Serve(a.ln); !errors.Is(err, http.ErrServerClosed) {
			served <- err
			return err
		}
		return nil
	})
	a.log.Info("smsgw listening", "addr", a.Addr(), "providers", a.providers)

	var runErr error
	select {
	case <-ctx.Done():
	case err := <-served:
		runErr = fmt.Errorf("http server: %w", err)
	}
	a.log.Info("shutting down: finishing in-flight requests")
	sctx, cancel := context.WithTimeout(context.Background(), a.cfg.Server.ShutdownTimeout.Duration)
	defer cancel()
	if err := a.srv.Shutdown(sctx); err != nil {
		a.log.Error("in-flight requests did not finish in time", "err", err)
	}
	stopLoops()
	_ = g.Wait() // the loops log their own failures; the server's is runErr
	if err := a.stop(sctx); err != nil && runErr == nil {
		runErr = err
	}
	a.log.Info("shutdown complete")
	return runErr
}

// onStop adds a step to the shutdown: fn undoes what was just started.
func (a *App) onStop(fn func(ctx context.Context) error) { a.stops = append(a.stops, fn) }

// onClose is onStop for what cannot fail.
func (a *App) onClose(fn func()) {
	a.onStop(func(context.Context) error { fn(); return nil })
}

// stop runs the shutdown steps, last first, once; its error is the first
// step's that failed (only the audit flush can).
func (a *App) stop(ctx context.Context) error {
	a.stopOnce.Do(func() {
		for i := len(a.stops) - 1; i >= 0; i-- {
			if err := a.stops[i](ctx); err != nil && a.stopErr == nil {
				a.stopErr = err
			}
		}
		a.stops = nil
	})
	return a.stopErr
}

// Close releases what New opened, if Run has not: an App that never ran
// has its audit queue flushed, then its connections closed.
func (a *App) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.Server.ShutdownTimeout.Duration)
	defer cancel()
	if err := a.stop(ctx); err != nil {
		a.log.Error("audit rows not flushed", "err", err)
	}
}

// postgres is the audit trail's home.
type postgres struct {
	pool   *pgxpool.Pool
	writer *audit.Writer
}

// startPostgres opens the pool and the audit writer and migrates. Postgres
// down at start does not stop the service: rows are spooled until the schema
// is known to be there, and a loop migrates once Postgres is back.
func (a *App) startPostgres(ctx context.Context, reg prometheus.Registerer) (postgres, error) {
	cfg := a.cfg
	pool, err := pgxpool.New(ctx, cfg.Postgres.URL)
	if err != nil {
		return postgres{}, fmt.Errorf("postgres.url: %w", err)
	}
	a.onClose(pool.Close)
	writer, err := audit.NewWriter(pool, audit.Options{
		QueueSize: cfg.Audit.QueueSize, BatchSize: cfg.Audit.BatchSize,
		SpoolDir: cfg.Audit.SpoolDir, SpoolMaxBytes: cfg.Audit.SpoolMaxBytes, WriteTimeout: cfg.Audit.WriteTimeout.Duration,
		RowsPerSubjectMinute: cfg.Audit.RowsPerSubjectMinute, RowsPerSecond: cfg.Audit.RefusalRowsPerSecond,
		Metrics: reg,
	}, a.log)
	if err != nil {
		return postgres{}, err
	}
	a.onStop(writer.Close)
	if err := Migrate(ctx, cfg, a.log); err != nil {
		a.log.Error("Postgres is not reachable: serving anyway, audit rows are spooled locally until it is", "err", err)
		writer.SetPostgresReady(false)
	}
	a.loops = append(a.loops, loop{"audit writer", writer.Run}, loop{"postgres maintenance", func(ctx context.Context) error {
		maintainPostgres(ctx, cfg, pool, writer, a.log)
		return nil
	}})
	return postgres{pool: pool, writer: writer}, nil
}
