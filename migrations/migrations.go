// Package migrations holds the database schema as ordered SQL files and
// applies the ones a database has not seen yet.
package migrations

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"sort"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

//go:embed *.sql
var files embed.FS

// lockID serializes migrations across processes starting at once.
const lockID = 0x736d7367 // "smsg"

// Migration is one schema change.
type Migration struct {
	Version string // the file name, e.g. "001_audit_log.sql"
	SQL     string
}

// All returns the embedded migrations in the order they apply.
func All() ([]Migration, error) {
	names, err := fs.Glob(files, "*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([]Migration, 0, len(names))
	for _, n := range names {
		b, err := files.ReadFile(n)
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: n, SQL: string(b)})
	}
	return out, nil
}

// Apply runs every migration the database has not recorded in
// schema_migrations, each in its own transaction, and returns the versions it
// applied. Concurrent callers wait for each other.
func Apply(ctx context.Context, conn *pgx.Conn) ([]string, error) {
	all, err := All()
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockID); err != nil {
		return nil, fmt.Errorf("migrations: lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", lockID)

	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    text PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	applied := map[string]bool{}
	rows, err := conn.Query(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	for _, v := range versions {
		applied[v] = true
	}
	var done []string
	for _, m := range all {
		if applied[m.Version] {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES ($1)", m.Version)
			return err
		})
		if err != nil {
			return done, fmt.Errorf("migrations: %s: %w", m.Version, err)
		}
		done = append(done, m.Version)
	}
	return done, nil
}

// EnsureDatabase creates the database databaseURL names when it does not exist
// yet and the role may create it, and says whether it did (for the log). It
// connects to the server's "postgres" database to do so.
func EnsureDatabase(ctx context.Context, databaseURL string) (created bool, err error) {
	conn, err := pgx.Connect(ctx, databaseURL)
	if err == nil {
		return false, conn.Close(ctx)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "3D000" { // invalid_catalog_name
		return false, err
	}
	cfg, perr := pgx.ParseConfig(databaseURL)
	if perr != nil {
		return false, perr
	}
	name := cfg.Database
	u, perr := url.Parse(databaseURL)
	if perr != nil || u.Scheme == "" {
		return false, fmt.Errorf("database %q does not exist; create it or use a URL-form postgres.url so smsgw can", name)
	}
	u.Path = "/postgres"
	admin, aerr := pgx.Connect(ctx, u.String())
	if aerr != nil {
		return false, fmt.Errorf("database %q does not exist and the server's postgres database is unreachable: %w", name, aerr)
	}
	defer admin.Close(ctx)
	_, cerr := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	if errors.As(cerr, &pgErr) && pgErr.Code == "42P04" { // duplicate_database: another process won
		return false, nil
	}
	if cerr != nil {
		return false, fmt.Errorf("create database %q: %w", name, cerr)
	}
	return true, nil
}
