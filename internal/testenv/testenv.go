// Package testenv connects tests to the real Redis and Postgres they run
// against. A missing service skips a test on a laptop and fails it in CI
// (CI=true), so CI can never pass by testing nothing.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"smsgw/migrations"
)

// RedisURL is the Redis the tests use (SMSGW_TEST_REDIS_URL).
func RedisURL() string {
	if u := os.Getenv("SMSGW_TEST_REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

// PostgresURL is a database the tests may connect to in order to create their
// own (SMSGW_TEST_DATABASE_URL).
func PostgresURL() string {
	if u := os.Getenv("SMSGW_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// serviceWait is how long a test waits for Redis or Postgres to answer
// before it calls the service unavailable. One ping with a 2 s deadline
// failed a CI run on a machine at load 22 while Redis served other tests'
// long scripts; a service that is really gone is refused at once, every
// try, and fails (CI=true) after this wait.
const serviceWait = 30 * time.Second

// Unavailable skips t, or fails it when CI=true.
func Unavailable(t testing.TB, what string, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is not available and CI=true: %v", what, err)
	}
	t.Skipf("%s is not available (%v); run `make test` to start it", what, err)
}

// Unique returns a short random name part, so concurrent tests and packages
// sharing one Redis or Postgres never see each other's data.
func Unique() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Redis returns a client and a key prefix of the test's own. Keys under the
// prefix are deleted when the test ends.
func Redis(t testing.TB) (*redis.Client, string) {
	t.Helper()
	opt, err := redis.ParseURL(RedisURL())
	if err != nil {
		t.Fatalf("SMSGW_TEST_REDIS_URL: %v", err)
	}
	rdb := redis.NewClient(opt)
	if err := poll(serviceWait, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return rdb.Ping(ctx).Err()
	}); err != nil {
		rdb.Close()
		Unavailable(t, "Redis at "+RedisURL(), err)
	}
	prefix := "test:" + Unique() + ":"
	t.Cleanup(func() {
		if err := UnlinkKeys(rdb, prefix+"*"); err != nil {
			t.Logf("delete test keys: %v", err)
		}
		rdb.Close()
	})
	return rdb, prefix
}

// UnlinkKeys removes every key matching the patterns, a SCAN page at a time.
func UnlinkKeys(rdb *redis.Client, patterns ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, pattern := range patterns {
		var cursor uint64
		for {
			keys, next, err := rdb.Scan(ctx, cursor, pattern, 10000).Result()
			if err != nil {
				return err
			}
			if len(keys) > 0 {
				if err := rdb.Unlink(ctx, keys...).Err(); err != nil {
					return err
				}
			}
			if next == 0 {
				break
			}
			cursor = next
		}
	}
	return nil
}

// Database creates an empty database of the test's own and returns its URL.
// It is dropped when the test ends.
func Database(t testing.TB) string {
	t.Helper()
	var admin *pgx.Conn
	if err := poll(serviceWait, func() (err error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		admin, err = pgx.Connect(ctx, PostgresURL())
		return err
	}); err != nil {
		Unavailable(t, "Postgres at "+PostgresURL(), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	defer admin.Close(context.Background())
	name := "smsgw_test_" + Unique()
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() { DropDatabase(t, name) })
	return WithDatabase(PostgresURL(), name)
}

// DropDatabase drops database name if it is there, for a test's cleanup: a
// failure is logged, not fatal.
func DropDatabase(t testing.TB, name string) {
	t.Helper()
	if err := onServer(func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		return err
	}); err != nil {
		t.Logf("drop test database %s: %v", name, err)
	}
}

// DatabaseExists says whether database name is there; a failure to look is
// a test error.
func DatabaseExists(t testing.TB, name string) bool {
	t.Helper()
	var exists bool
	if err := onServer(func(ctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists)
	}); err != nil {
		t.Errorf("check for database %s: %v", name, err)
	}
	return exists
}

// onServer runs fn on a connection to the Postgres server's own database,
// within 30 s.
func onServer(fn func(ctx context.Context, conn *pgx.Conn) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, PostgresURL())
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return fn(ctx, conn)
}

// WithDatabase returns the Postgres URL u pointing at database name.
func WithDatabase(u, name string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		return u
	}
	parsed.Path = "/" + strings.TrimPrefix(name, "/")
	return parsed.String()
}

// MigratedDatabase is Database with smsgw's schema applied.
func MigratedDatabase(t testing.TB) string {
	t.Helper()
	dsn := Database(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := migrations.Apply(ctx, conn); err != nil {
		t.Fatal(err)
	}
	return dsn
}

// DeadRedis is a client to a Redis that is not there (nothing listens on
// port 1): every call fails fast, without retries, as when Redis is down.
func DeadRedis(t testing.TB) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 100 * time.Millisecond, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}
