package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"smsgw/api"
	"smsgw/audit"
	"smsgw/challenge"
	"smsgw/internal/redisbatch"
	"smsgw/internal/redisconn"
	"smsgw/migrations"
	"smsgw/otp"
	"smsgw/otp/redisstore"
	"smsgw/pumping"
	"smsgw/ratelimit"
	"smsgw/sender/fake"
)

// run is the whole program; main only wires it to the process.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("smsgw", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "configuration file (default: $SMSGW_CONFIG, else ./config.toml if present, else built-in defaults)")
	dev := fs.Bool("dev", false, "run with no outside services: in-process Redis, audit to stderr, fake provider, loopback only")
	ready := fs.Bool("ready", false, "healthcheck: ask /readyz (Redis and Postgres answer) instead of /healthz")
	fs.Usage = func() {} // printed below: to stdout when asked for, to stderr after a mistake
	parse := func(args []string) error {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout, fs)
			return errHelp
		}
		if err != nil {
			usage(stderr, fs)
		}
		return err
	}
	if err := parse(args[1:]); err != nil {
		return helpIsNoError(err)
	}
	cmd := "serve"
	if rest := fs.Args(); len(rest) > 0 {
		cmd = rest[0]
		if err := parse(rest[1:]); err != nil { // flags may follow the command
			return helpIsNoError(err)
		}
		if fs.NArg() > 0 {
			return fmt.Errorf("unexpected argument %q", fs.Arg(0))
		}
	}
	switch cmd {
	case "help":
		usage(stdout, fs)
		return nil
	case "serve", "migrate", "healthcheck":
	default:
		usage(stderr, fs)
		return fmt.Errorf("unknown command %q", cmd)
	}

	path := *configPath
	if path == "" {
		path = getenv("SMSGW_CONFIG")
	}
	if path == "" {
		if _, err := os.Stat("config.toml"); err == nil {
			path = "config.toml"
		}
	}
	cfg, err := loadConfig(path, getenv)
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log.Level, stderr)
	redis.SetLogger(redisLog{log})

	switch cmd {
	case "serve":
		sec := secrets{code: getenv("SMSGW_SECRET"), adminToken: getenv("SMSGW_ADMIN_TOKEN"),
			twilioSID: getenv("TWILIO_ACCOUNT_SID"), twilioToken: getenv("TWILIO_AUTH_TOKEN"), httpSecret: getenv("SMSGW_HTTP_SECRET"),
			challenge: getenv("SMSGW_CHALLENGE_SECRET")}
		if *dev {
			return serveDev(ctx, cfg, sec, log, stderr)
		}
		if err := sec.validate(cfg); err != nil {
			return err
		}
		return serve(ctx, cfg, sec, log)
	case "migrate":
		if *dev {
			return errors.New("-dev has no database to migrate")
		}
		return migrate(ctx, cfg, log)
	case "healthcheck":
		return healthcheck(ctx, cfg.Server.Listen, *ready, stdout)
	}
	return nil
}

// errHelp is -h: usage was printed, and asking for it is no failure.
var errHelp = errors.New("help requested")

func helpIsNoError(err error) error {
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}

func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `usage: smsgw [command] [flags]

commands:
  serve         run the service (the default); applies pending migrations first
  migrate       create the database if missing, apply migrations, and exit
  healthcheck   ask a running smsgw (at server.listen) for /healthz; exit 0 if healthy
  help          print this

flags:
`)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprint(w, `
environment: SMSGW_CONFIG, SMSGW_LISTEN, SMSGW_REDIS_URL, SMSGW_DATABASE_URL,
  SMSGW_SECRET (required to serve), SMSGW_ADMIN_TOKEN (admin API and console),
  TWILIO_ACCOUNT_SID, TWILIO_AUTH_TOKEN, SMSGW_HTTP_SECRET, SMSGW_CHALLENGE_SECRET
`)
}

func newLogger(level string, w io.Writer) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))
}

// migrate creates the database if it is missing (and the role may), then
// applies pending migrations.
func migrate(ctx context.Context, cfg *Config, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	created, err := migrations.EnsureDatabase(ctx, cfg.Postgres.URL)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if created {
		log.Info("database created", "database", databaseName(cfg.Postgres.URL))
	}
	conn, err := pgx.Connect(ctx, cfg.Postgres.URL)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	applied, err := migrations.Apply(ctx, conn)
	if err != nil {
		return err
	}
	if len(applied) > 0 {
		log.Info("migrations applied", "applied", applied)
	}
	all, _ := migrations.All()
	log.Info("database schema up to date", "version", all[len(all)-1].Version, "applied_now", len(applied))
	return nil
}

// databaseName is the database a URL names, for the log (never the URL:
// it may hold a password).
func databaseName(databaseURL string) string {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return ""
	}
	return cfg.Database
}

// redisLog sends go-redis's own messages (dial failures and the like, one
// per failing request while Redis is down) to the service log at debug level;
// the requests themselves report the outage.
type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "redis: "+fmt.Sprintf(format, v...))
}

// secrets come from the environment only, never from the config file.
type secrets struct {
	code        string // SMSGW_SECRET
	adminToken  string // SMSGW_ADMIN_TOKEN
	twilioSID   string // TWILIO_ACCOUNT_SID
	twilioToken string // TWILIO_AUTH_TOKEN
	httpSecret  string // SMSGW_HTTP_SECRET
	challenge   string // SMSGW_CHALLENGE_SECRET
}

// validate checks every secret and credential the configuration needs
// before anything is created or changed (database, schema, spool): a start
// that is going to fail fails first.
func (sec secrets) validate(cfg *Config) error {
	if sec.code == "" {
		return fmt.Errorf("SMSGW_SECRET: must be set (at least %d random characters, e.g. `openssl rand -hex 32`); it keys the codes at rest", otp.MinSecretLength)
	}
	if _, err := otp.NewSecrets(sec.code); err != nil {
		return fmt.Errorf("SMSGW_SECRET: %w", err)
	}
	if err := cfg.challenge(sec.challenge).Validate(); err != nil {
		return err
	}
	// Building the providers checks their credentials and touches nothing.
	_, err := buildProviders(cfg, sec, nil, prometheus.NewRegistry())
	return err
}

// deps is what serve and serveDev build differently; the rest is shared.
type deps struct {
	rdb         redis.UniversalClient
	auditLog    otp.AuditLog
	auditReader otp.AuditReader
	deliveries  otp.DeliveryLog
	checks      []api.Check
	onText      func(fake.Message)
	// closeAudit flushes the audit log at shutdown.
	closeAudit func(ctx context.Context) error
}

func serve(ctx context.Context, cfg *Config, sec secrets, log *slog.Logger) error {
	pool, err := pgxpool.New(ctx, cfg.Postgres.URL)
	if err != nil {
		return fmt.Errorf("postgres.url: %w", err)
	}
	defer pool.Close()
	rdb, err := redisconn.New(cfg.redis())
	if err != nil {
		return err
	}
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		log.Warn("redis is not answering; sends answer 503 until it does", "err", err)
	}
	reg := newRegistry()
	writer, err := audit.NewWriter(pool, audit.Options{
		QueueSize: cfg.Audit.QueueSize, BatchSize: cfg.Audit.BatchSize,
		SpoolDir: cfg.Audit.SpoolDir, SpoolMaxBytes: cfg.Audit.SpoolMaxBytes, WriteTimeout: cfg.Audit.WriteTimeout.Duration,
		Metrics: reg,
	}, log)
	if err != nil {
		return err
	}
	// Postgres down at start does not stop the service: rows are spooled
	// until the schema is known to be there.
	if err := migrate(ctx, cfg, log); err != nil {
		log.Error("Postgres is not reachable: serving anyway, audit rows are spooled locally until it is", "err", err)
		writer.SetPostgresReady(false)
	}
	maintainCtx, stopMaintaining := context.WithCancel(ctx)
	defer stopMaintaining()
	go maintainPostgres(maintainCtx, cfg, pool, writer, log)
	return serveHTTP(ctx, cfg, sec, log, reg, deps{
		rdb:         rdb,
		auditLog:    writer,
		auditReader: audit.NewReader(pool),
		deliveries:  audit.NewDeliveries(pool),
		checks: []api.Check{
			{Name: "redis", Check: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }},
			{Name: "postgres", Check: pool.Ping},
			// Rows can be made durable somewhere (Postgres or the spool).
			{Name: "audit", Check: writer.Ready},
		},
		closeAudit: writer.Close,
	})
}

// maintainPostgres migrates the schema (retrying while Postgres is away),
// then lets the audit writer use Postgres, and keeps the audit partitions:
// created ahead, expired ones dropped, at start and every six hours.
func maintainPostgres(ctx context.Context, cfg *Config, pool *pgxpool.Pool, writer *audit.Writer, log *slog.Logger) {
	for !writer.PostgresReady() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
		if err := migrate(ctx, cfg, log); err == nil {
			writer.SetPostgresReady(true)
			log.Info("Postgres is back: replaying the audit spool")
		}
	}
	tick := time.NewTicker(6 * time.Hour)
	defer tick.Stop()
	for {
		mctx, cancel := context.WithTimeout(ctx, time.Minute)
		dropped, err := audit.Maintain(mctx, pool, time.Now(), cfg.Audit.PartitionsAhead, cfg.Audit.Retention.Duration)
		cancel()
		if err != nil {
			log.Error("audit partition maintenance failed; retrying in six hours", "err", err)
		} else if len(dropped) > 0 {
			log.Info("audit partitions past retention dropped", "partitions", dropped, "retention", cfg.Audit.Retention.Duration)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// serveHTTP builds the service over d and serves until ctx ends, then shuts
// down in order: stop taking requests, finish in-flight ones, flush audit.
func serveHTTP(ctx context.Context, cfg *Config, sec secrets, log *slog.Logger, reg *prometheus.Registry, d deps) error {
	codeKeys, err := otp.NewSecrets(sec.code)
	if err != nil {
		return fmt.Errorf("SMSGW_SECRET: %w", err)
	}
	for _, size := range cfg.messages.Sizes(cfg.OTP.Length) {
		if size.Segments > 1 {
			log.Warn("code text takes more than one SMS segment", "locale", size.Locale,
				"encoding", size.Encoding, "length", size.Units, "segments", size.Segments)
		}
	}
	// Limiter and code store share pipelines: a send's decision and its code
	// ride with other requests' in one round trip.
	// With min_replicas_acked each pipeline ends in WAIT: an admission (and
	// its code) is held by that many replicas before any text goes out.
	scripts := redisbatch.New(d.rdb, redisbatch.Options{
		Pipelines:   cfg.Redis.Pipelines,
		Timeout:     cfg.Redis.Timeout.Duration,
		MinReplicas: cfg.Redis.MinReplicasAcked,
	})
	limiter := ratelimit.New(d.rdb, cfg.Redis.KeyPrefix, ratelimit.Options{Scripts: scripts, LocalRefusals: cfg.Limits.LocalRefusalCache,
		ReservationLease: max(5*time.Second, 4*cfg.Redis.Timeout.Duration)})
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "smsgw_ratelimit_contention_refusals_total",
		Help: "Refusals owed only to other requests' pending reservations (Redis Cluster, subjects on several shards).",
	}, func() float64 { return float64(limiter.ContentionRefusals()) }))
	// Background loops stop after the last request and before Redis and the
	// audit log close, so what they flush on the way out still has somewhere
	// to go.
	runCtx, stopRun := context.WithCancel(context.Background())
	var running sync.WaitGroup
	defer func() { stopRun(); running.Wait() }()
	running.Add(1)
	go func() {
		defer running.Done()
		if err := limiter.Run(runCtx); err != nil {
			log.Error("limiter refusal cache stopped", "err", err)
		}
	}()
	prov, err := buildProviders(cfg, sec, d.onText, reg)
	if err != nil {
		return err
	}
	// The guard always runs: with its rules off it still keeps the
	// operators' overrides and the spend ceiling.
	_, onCluster := d.rdb.(*redis.ClusterClient)
	guard := pumping.New(d.rdb, cfg.Redis.KeyPrefix, cfg.pumping(), pumping.Options{Log: log, Registerer: reg, Cluster: onCluster})
	running.Add(1)
	go func() {
		defer running.Done()
		if err := guard.Run(runCtx); err != nil {
			log.Error("pumping guard stopped", "err", err)
		}
	}()
	var verifier otp.ChallengeVerifier
	if ch := cfg.challenge(sec.challenge); ch.On() {
		verifier = challenge.New(ch, nil, reg)
	}
	svc := otp.NewService(otp.Config{
		DefaultRegion: cfg.Phone.DefaultRegion,
		IPv6Prefix:    cfg.Limits.IPv6Prefix,
		IPRules:       rules(cfg.Limits.IP),
		PhoneRules:    rules(cfg.Limits.Phone),
		VerifyIPRules: rules(cfg.Limits.VerifyIP),
		CountryRules:  rules(cfg.Limits.Country),
		PrefixRules:   cfg.prefixRules,
		GlobalRules:   rules(cfg.Limits.Global),
		Policy:        cfg.policy(),
		CodeLength:    cfg.OTP.Length,
		CodeTTL:       cfg.OTP.TTL.Duration,
		MaxAttempts:   cfg.OTP.MaxAttempts,
		SendTimeout:   cfg.Sender.Timeout.Duration,
		TestNumbers:   cfg.TestNumbers,
	}, otp.Deps{
		Limiter:     limiter,
		Sender:      prov.router,
		Codes:       redisstore.New(d.rdb, cfg.Redis.KeyPrefix, scripts),
		Idempotency: redisstore.NewIdempotency(d.rdb, cfg.Redis.KeyPrefix),
		Pumping:     guard,
		Overrides:   guard,
		Challenge:   verifier,
		Secrets:     codeKeys,
		Messages:    cfg.messages,
	}, log)
	deps := api.Deps{Service: svc, AuditLog: d.auditLog, AuditReader: d.auditReader, Deliveries: d.deliveries,
		Checks: d.checks, Metrics: reg}
	if prov.outbox != nil {
		deps.Outbox = prov.outbox // a nil *fake.Provider in the interface would not be nil
	}
	deps.Pumping = guard
	handler := api.NewServer(log, api.Config{
		TrustedProxies: cfg.trustedProxies,
		DefaultRegion:  cfg.Phone.DefaultRegion,
		AdminToken:     sec.adminToken,
		MaxAttempts:    cfg.OTP.MaxAttempts,
		Twilio:         prov.twilio,
		APIKeys:        cfg.apiKeys,
	}, deps)

	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return fmt.Errorf("server.listen: %w", err)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("smsgw listening", "addr", ln.Addr().String(), "providers", prov.router.Providers())

	select {
	case err := <-served:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing in-flight requests")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.Server.ShutdownTimeout.Duration)
	defer cancel()
	shutdownErr := srv.Shutdown(sctx)
	if shutdownErr != nil {
		log.Error("in-flight requests did not finish in time", "err", shutdownErr)
	}
	stopRun()
	running.Wait()
	if err := d.closeAudit(sctx); err != nil {
		return err
	}
	log.Info("shutdown complete")
	return nil
}
