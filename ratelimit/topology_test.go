package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/internal/hashslot"
	"smsgw/internal/redisbatch"
	"smsgw/internal/redistopo"
	"smsgw/internal/testenv"
	"smsgw/otp"
)

// backend gives a test a Redis client and a key prefix of its own.
type backend func(t *testing.T) (redis.UniversalClient, string)

// single is the shared Redis primary.
func single(t *testing.T) (redis.UniversalClient, string) {
	t.Helper()
	return testenv.Redis(t)
}

// onCluster is a 3-master Redis Cluster of the test's own.
func onCluster(c *redistopo.Cluster) backend {
	return func(t *testing.T) (redis.UniversalClient, string) {
		t.Helper()
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ReadTimeout: 5 * time.Second, MaxRetries: -1})
		t.Cleanup(func() { rdb.Close() })
		return rdb, "test:" + testenv.Unique() + ":"
	}
}

// suites run on one primary and on Redis Cluster alike.
var suites = []struct {
	name string
	run  func(*testing.T, backend)
}{
	{"AllowSequences", testAllowSequences},
	{"SameMicrosecondRequestsBothCount", testSameMicrosecondRequestsBothCount},
	{"RefundGivesQuotaBackEverywhere", testRefundGivesQuotaBackEverywhere},
	{"KeysExpireAfterTheLongestWindow", testKeysExpireAfterTheLongestWindow},
	{"RacesAdmitExactlyTheLimit", testRacesAdmitExactlyTheLimit},
	{"MatchesReferenceModel", testMatchesReferenceModel},
	{"PipelinedDecisionsStayExact", testPipelinedDecisionsStayExact},
	{"StatusAndReset", testStatusAndReset},
	{"RefusalsAnsweredFromMemory", testRefusalsAnsweredFromMemory},
	{"RefusalCacheStaysUnusedUntilSubscribed", testRefusalCacheStaysUnusedUntilSubscribed},
	{"ReplicasRaceAndResetTogether", testReplicasRaceAndResetTogether},
	{"RefundReachesTheOtherReplica", testRefundReachesTheOtherReplica},
}

func TestSinglePrimary(t *testing.T) {
	for _, s := range suites {
		t.Run(s.name, func(t *testing.T) { s.run(t, single) })
	}
}

func TestCluster(t *testing.T) {
	be := onCluster(redistopo.StartCluster(t, 3))
	for _, s := range suites {
		t.Run(s.name, func(t *testing.T) { s.run(t, be) })
	}
	t.Run("hash slots as Redis computes them", func(t *testing.T) {
		rdb, _ := be(t)
		for _, tag := range []string{"send:phone:+14155550100", "send:ip:203.0.113.7", "verify:ip:2001:db8::/64", "", "x"} {
			want, err := rdb.ClusterKeySlot(context.Background(), "p:rl:{"+tag+"}").Result()
			if err != nil {
				t.Fatal(err)
			}
			if tag == "" {
				continue // an empty tag is no tag; subjects always have keys
			}
			if got := hashslot.OfTag(tag); int64(got) != want {
				t.Errorf("slot of %q: %d, Redis says %d", tag, got, want)
			}
		}
	})
	t.Run("a reservation never committed expires with its lease", func(t *testing.T) {
		l, _, clock := newTestLimiter(t, be)
		a, x := phone("+14155550100"), ip("203.0.113.7")
		if len(l.slots([]otp.Subject{a, x})) != 2 {
			t.Fatal("the phone and the IP share a slot; pick others")
		}
		ctx := context.Background()
		// A replica reserves on the phone's shard and dies before committing.
		if _, r, err := l.allowOne(ctx, ticket(), []otp.Subject{a}, nil, l.lease); err != nil || !r.allowed {
			t.Fatalf("reserve: %+v %v", r, err)
		}
		clock.Set(t0.Add(time.Second))
		before := l.ContentionRefusals()
		d, err := l.Allow(ctx, ticket(), []otp.Subject{a, x})
		if err != nil || d.Allowed {
			t.Fatalf("while reserved: %+v %v", d, err)
		}
		if l.ContentionRefusals() != before+1 {
			t.Fatal("a refusal owed to a reservation was not counted as contention")
		}
		clock.Set(t0.Add(time.Second + l.lease))
		if d, err := l.Allow(ctx, ticket(), []otp.Subject{a, x}); err != nil || !d.Allowed {
			t.Fatalf("after the lease: %+v %v", d, err)
		}
		// The IP's reservation from the refused decision was released.
		st, err := l.Status(ctx, []otp.Subject{x})
		if err != nil || st[0].Used != 1 {
			t.Fatalf("IP windows after one admission: %+v %v", st, err)
		}
	})
}

// TestReplicasMustHoldAnAdmission: with min_replicas_acked, an admission the
// replicas do not acknowledge in time is refunded and reported as an error
// (the service answers 503); once they answer again it is admitted. On one
// primary with a replica, and on a cluster with a replica per shard.
func TestReplicasMustHoldAnAdmission(t *testing.T) {
	t.Run("primary and replica", func(t *testing.T) {
		primary, replica, _ := redistopo.StartReplicated(t)
		rdb := primary.Client()
		t.Cleanup(func() { rdb.Close() })
		l := mustReplicate(t, rdb, []*redistopo.Node{replica}, true)
		rc := replica.Client()
		defer rc.Close()
		if n, err := rc.ZCard(context.Background(), l.key(phone("+14155550100"))).Result(); err != nil || n != 1 {
			t.Fatalf("the replica holds %d entries for the phone (%v), want 1", n, err)
		}
	})
	t.Run("cluster", func(t *testing.T) {
		c := redistopo.StartReplicatedCluster(t, 3)
		rdb := c.Client()
		t.Cleanup(func() { rdb.Close() })
		// The cluster client may also meet a frozen replica when it reloads
		// its slot map: any error will do. A reservation that could not be
		// released then counts until its lease runs out, and no longer.
		mustReplicate(t, rdb, c.Nodes[3:], false)
	})
}

// mustReplicate freezes the replicas during one decision, which must fail
// (with a NotReplicatedError when notReplicated), then requires the refund:
// an admission at once (notReplicated), or once any reservation left behind
// has run out its lease.
func mustReplicate(t *testing.T, rdb redis.UniversalClient, replicas []*redistopo.Node, notReplicated bool) *Limiter {
	t.Helper()
	l := New(rdb, "t:", Options{Scripts: redisbatch.New(rdb, redisbatch.Options{Timeout: 2 * time.Second, MinReplicas: 1})})
	ctx := context.Background()
	a, x := phone("+14155550100"), ip("203.0.113.7")
	for _, r := range replicas {
		r.Pause()
	}
	_, err := l.Allow(ctx, ticket(), []otp.Subject{a, x})
	for _, r := range replicas {
		r.Resume()
	}
	var nr *redisbatch.NotReplicatedError
	if err == nil || notReplicated && !errors.As(err, &nr) {
		t.Fatalf("allow with the replicas frozen: %v, want a NotReplicatedError", err)
	}
	testenv.WaitUntil(t, l.lease+10*time.Second, "an admission after the replicas came back", func() error {
		d, err := l.Allow(ctx, ticket(), []otp.Subject{a, x})
		if err == nil && d.Allowed {
			return nil
		}
		if err == nil && notReplicated {
			t.Fatalf("refused after the replicas came back (the first admission was not refunded): %+v", d)
		}
		return fmt.Errorf("%+v %v", d, err)
	})
	return l
}
