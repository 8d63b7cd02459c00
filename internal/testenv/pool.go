package testenv

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Pool is a pool on a migrated database of the test's own (MigratedDatabase),
// closed when the test ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return PoolOn(t, MigratedDatabase(t))
}

// PoolOn is a pool on the database at dsn, closed when the test ends.
func PoolOn(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Querier is a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Strings runs query, whose rows are one text column, and returns the
// column; an error fails the test.
func Strings(t testing.TB, q Querier, query string, args ...any) []string {
	t.Helper()
	rows, err := q.Query(context.Background(), query, args...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}
