package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/redis/go-redis/v9"

	"smsgw/internal/app"
	"smsgw/otp"
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
	cfg, err := app.LoadConfig(path, getenv)
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log.Level, stderr)
	redis.SetLogger(app.RedisLog{Log: log})

	switch cmd {
	case "serve":
		a, err := app.New(ctx, cfg, app.SecretsFrom(getenv), app.Deps{Log: log, Dev: *dev, Stderr: stderr})
		if err != nil {
			return err
		}
		defer a.Close()
		return a.Run(ctx)
	case "migrate":
		if *dev {
			return errors.New("-dev has no database to migrate")
		}
		return app.Migrate(ctx, cfg, log)
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

// newLogger writes JSON lines, each stamped with its request's id.
func newLogger(level string, w io.Writer) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(otp.NewLogHandler(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})))
}
