package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"smsgw/audit"
	"smsgw/migrations"
)

// Migrate creates the database if it is missing (and the role may), then
// applies pending migrations.
func Migrate(ctx context.Context, cfg *Config, log *slog.Logger) error {
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
		if err := Migrate(ctx, cfg, log); err == nil {
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
