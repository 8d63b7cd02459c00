package region

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/codestore"
	"smsgw/internal/redisbatch"
	"smsgw/internal/redistopo"
	"smsgw/internal/testenv"
	"smsgw/otp"
	"smsgw/ratelimit"
)

// A region cut from a home on a Redis Cluster admits from its ledger and,
// once healed, carries the admission into the Cluster's windows; a code it
// issued meanwhile verifies, and one issued at the Cluster home verifies
// through the link.
func TestFallbackToAClusterHome(t *testing.T) {
	ctx := context.Background()
	const limit = 2
	cluster := redistopo.StartCluster(t, 3)
	link := redistopo.NewClusterLink(t, cluster, 5*time.Millisecond)
	crdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: link.Addrs(), MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
	t.Cleanup(func() { crdb.Close() })
	scripts := redisbatch.New(crdb, redisbatch.Options{Timeout: 2 * time.Second})
	home := Store{Name: "c", Redis: crdb, Scripts: scripts, Limiter: ratelimit.New(crdb, prefix, ratelimit.Options{Scripts: scripts}),
		Codes: codestore.New(crdb, prefix, scripts), Idempotency: codestore.NewIdempotency(crdb, prefix)}
	local := store(t, "a", redistopo.StartSingle(t).Addr)
	d := New(Options{Homes: NewHomes(1, "c", nil, nil), Fallback: 1, Local: local, Remote: []Store{home},
		FallbackCodes: codestore.New(local.Redis, prefix+"fb:", local.Scripts), FallbackIdempotency: codestore.NewIdempotency(local.Redis, prefix+"fb:"),
		Prefix: prefix})
	phone := subjects("+33612345678", "FR", "192.0.2.1", limit, 1000)

	if dec, err := d.Limiter().Allow(ctx, ticket(), phone); err != nil || !dec.Allowed {
		t.Fatalf("through the link: %+v %v", dec, err)
	}
	if _, err := d.Codes().Issue(ctx, "+33612345678", otp.StoredCode{MAC: []byte("home"), Sealed: []byte("s")}, time.Minute); err != nil {
		t.Fatal(err)
	}
	link.Cut()
	for i, want := range []bool{true, false} { // F = 1
		dec, err := d.Limiter().Allow(ctx, ticket(), phone)
		if err != nil || dec.Allowed != want {
			t.Fatalf("send %d while cut: %+v %v, want admitted %v", i, dec, err, want)
		}
	}
	if _, err := d.Codes().Issue(ctx, "+33612345679", otp.StoredCode{MAC: []byte("fb"), Sealed: []byte("s")}, time.Minute); err != nil {
		t.Fatalf("issue while cut: %v", err)
	}
	if res, _, err := d.Codes().Check(ctx, "+33612345679", []byte("fb"), 5); err != nil || res != otp.CodeApproved {
		t.Fatalf("check of a fallback code while cut: %v %v", res, err)
	}
	link.Heal()
	testenv.WaitFor(t, 30*time.Second, "the carry into the Cluster", func() bool {
		n, err := d.carryOnce(ctx, &d.o.Remote[0])
		return err == nil && n == 1
	})
	ws, err := home.Limiter.Status(ctx, phone[:1])
	if err != nil || ws[0].Used != limit {
		t.Fatalf("the Cluster's window after the carry: %+v %v, want %d", ws, err, limit)
	}
	if res, _, err := d.Codes().Check(ctx, "+33612345678", []byte("home"), 5); err != nil || res != otp.CodeApproved {
		t.Fatalf("check of the home's code after healing: %v %v", res, err)
	}
}
