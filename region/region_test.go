package region

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
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

// pair is two regions on Redis servers of the test's own: "a" homes GB,
// "b" everything else. Each reaches the other's Redis through a proxy with
// a delay, as across regions.
type pair struct {
	a, b       *Deployment
	aToB, bToA *testenv.Proxy
	redisA     *redistopo.Node
}

const prefix = "t:"

func store(t *testing.T, name, addr string) Store {
	t.Helper()
	return storeOn(t, name, redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second}))
}

// storeOn is a region's store over a client of any topology, closed when
// the test ends.
func storeOn(t *testing.T, name string, rdb redis.UniversalClient) Store {
	t.Helper()
	t.Cleanup(func() { rdb.Close() })
	scripts := redisbatch.New(rdb, redisbatch.Options{Timeout: 2 * time.Second})
	return Store{Name: name, Redis: rdb, Scripts: scripts, Limiter: ratelimit.New(rdb, prefix, ratelimit.Options{Scripts: scripts}),
		Codes: codestore.New(rdb, prefix, scripts), Idempotency: codestore.NewIdempotency(rdb, prefix)}
}

// deploy is a region's deployment over its store and the others'.
func deploy(homes Homes, fallback int, local Store, remote ...Store) *Deployment {
	return New(Options{Homes: homes, Fallback: fallback, Local: local, Remote: remote,
		FallbackCodes: codestore.New(local.Redis, prefix+"fb:", local.Scripts), FallbackIdempotency: codestore.NewIdempotency(local.Redis, prefix+"fb:"),
		Prefix: prefix})
}

func newPair(t *testing.T, fallback int) pair {
	t.Helper()
	homes := NewHomes(1, "b", map[string]string{"GB": "a"}, nil)
	return newPairWith(t, fallback, homes, homes)
}

// newPairWith is newPair with each region's own table of homes.
func newPairWith(t *testing.T, fallback int, homesA, homesB Homes) pair {
	t.Helper()
	ra, rb := redistopo.StartSingle(t), redistopo.StartSingle(t)
	p := pair{aToB: testenv.NewDelayProxy(t, rb.Addr, 10*time.Millisecond), bToA: testenv.NewDelayProxy(t, ra.Addr, 10*time.Millisecond), redisA: ra}
	p.a = deploy(homesA, fallback, store(t, "a", ra.Addr), store(t, "b", p.aToB.Addr()))
	p.b = deploy(homesB, fallback, store(t, "b", rb.Addr), store(t, "a", p.bToA.Addr()))
	return p
}

// subjects are a send's: the number (homed by its country) and the client.
func subjects(phone, country, ip string, phoneMax, ipMax int) []otp.Subject {
	return []otp.Subject{
		{Scope: "phone", Key: "send:phone:" + phone, Country: country, Rules: []otp.Rule{{Window: time.Hour, Max: phoneMax}}},
		{Scope: "ip", Key: "send:ip:" + ip, Rules: []otp.Rule{{Window: time.Hour, Max: ipMax}}},
	}
}

var tickets atomic.Int64

func ticket() string { return strconv.FormatInt(tickets.Add(1), 10) }

// race decides n requests on subjects at once, alternating between the
// regions, and counts the admitted ones.
func race(t *testing.T, p pair, n int, subjects []otp.Subject) int {
	t.Helper()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		d := p.a
		if i%2 == 1 {
			d = p.b
		}
		wg.Go(func() {
			dec, err := d.Limiter().Allow(context.Background(), ticket(), subjects)
			if err != nil {
				t.Error(err)
				return
			}
			if dec.Allowed {
				admitted.Add(1)
			}
		})
	}
	wg.Wait()
	return int(admitted.Load())
}

func TestRaceFromBothRegionsAdmitsExactlyTheLimit(t *testing.T) {
	p := newPair(t, 0)
	for _, tc := range []struct {
		name, phone, country string
	}{{"homed in a", "+447911123456", "GB"}, {"homed in b", "+14155550100", "US"}} {
		t.Run(tc.name, func(t *testing.T) {
			const limit = 3
			if got := race(t, p, 40, subjects(tc.phone, tc.country, "192.0.2.1", limit, 1000)); got != limit {
				t.Fatalf("admitted %d over two regions, want exactly %d", got, limit)
			}
		})
	}
}

func TestCrossesOnlyForARemoteHome(t *testing.T) {
	ctx := context.Background()
	p := newPair(t, 0)
	lim := p.a.Limiter()
	// Warm the connection and the scripts.
	if _, err := lim.Allow(ctx, ticket(), subjects("+14155550199", "US", "192.0.2.9", 5, 5)); err != nil {
		t.Fatal(err)
	}
	before := p.aToB.Requests()
	if d, err := lim.Allow(ctx, ticket(), subjects("+447911123456", "GB", "192.0.2.1", 5, 1)); err != nil || !d.Allowed {
		t.Fatalf("local home: %+v %v", d, err)
	}
	if n := p.aToB.Requests() - before; n != 0 {
		t.Fatalf("a number homed here made %d cross-region requests, want 0", n)
	}
	if d, err := lim.Allow(ctx, ticket(), subjects("+14155550100", "US", "192.0.2.2", 5, 1)); err != nil || !d.Allowed {
		t.Fatalf("remote home: %+v %v", d, err)
	}
	if n := p.aToB.Requests() - before; n != 1 {
		t.Fatalf("a number homed elsewhere made %d cross-region requests, want 1", n)
	}
	// The address window is full: refused here, nothing crosses.
	if d, err := lim.Allow(ctx, ticket(), subjects("+14155550101", "US", "192.0.2.2", 5, 1)); err != nil || d.Allowed {
		t.Fatalf("local refusal: %+v %v", d, err)
	}
	if n := p.aToB.Requests() - before; n != 1 {
		t.Fatalf("a request refused by a local window crossed (%d requests, want 1)", n)
	}
}

func TestCutFailsClosedWithoutFallback(t *testing.T) {
	ctx := context.Background()
	p := newPair(t, 0)
	p.bToA.Cut()
	_, err := p.b.Limiter().Allow(ctx, ticket(), subjects("+447911123456", "GB", "192.0.2.1", 5, 5))
	if err == nil || !Unreachable(err) {
		t.Fatalf("home cut off: got %v, want an unreachable error (503)", err)
	}
	// The address window gave its reservation back.
	ws, err := p.b.Limiter().Status(ctx, subjects("+14155550100", "US", "192.0.2.1", 5, 5)[1:])
	if err != nil || ws[0].Used != 0 {
		t.Fatalf("address window after a refused cross-region send: %+v %v", ws, err)
	}
}

func TestCutStaysWithinTheBoundAndHealCarriesHome(t *testing.T) {
	ctx := context.Background()
	const limit, fallback = 3, 2
	p := newPair(t, fallback)
	phone := subjects("+447911123456", "GB", "192.0.2.1", limit, 1000)
	p.bToA.Cut()
	admitted := 0
	for i := range 10 {
		d := p.a
		if i%2 == 1 {
			d = p.b
		}
		dec, err := d.Limiter().Allow(ctx, ticket(), phone)
		if err != nil {
			t.Fatal(err)
		}
		if dec.Allowed {
			admitted++
		}
	}
	if admitted != limit+fallback {
		t.Fatalf("admitted %d while cut apart, want L + (R-1)·F = %d", admitted, limit+fallback)
	}
	if p.b.Fallbacks() != fallback {
		t.Fatalf("b made %d fallback admissions, want %d", p.b.Fallbacks(), fallback)
	}
	// The code of a fallback admission is kept locally and verifies here.
	code := otp.StoredCode{MAC: []byte("mac"), Sealed: []byte("sealed")}
	if _, err := p.b.Codes().Issue(ctx, "+447911123456", code, time.Minute); err != nil {
		t.Fatalf("issue under fallback: %v", err)
	}
	if res, _, err := p.b.Codes().Check(ctx, "+447911123456", []byte("mac"), 5); err != nil || res != otp.CodeApproved {
		t.Fatalf("check under fallback: %v %v", res, err)
	}

	p.bToA.Heal()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- p.b.Run(runCtx) }()
	defer func() { stop(); <-done }()
	deadline := time.Now().Add(30 * time.Second)
	for p.b.Carried() < fallback {
		if time.Now().After(deadline) {
			t.Fatalf("carried %d of %d fallback admissions after healing", p.b.Carried(), fallback)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ws, err := p.a.Limiter().Status(ctx, phone[:1])
	if err != nil {
		t.Fatal(err)
	}
	if ws[0].Used != limit+fallback {
		t.Fatalf("home window holds %d after the carry, want %d", ws[0].Used, limit+fallback)
	}
	if dec, err := p.b.Limiter().Allow(ctx, ticket(), phone); err != nil || dec.Allowed {
		t.Fatalf("after healing the home refuses: %+v %v", dec, err)
	}
}

// A region cut from a home on a Redis Cluster admits from its ledger and,
// once healed, carries the admission into the Cluster's windows; a code it
// issued meanwhile verifies, and one issued at the Cluster home verifies
// through the link.
func TestFallbackToAClusterHome(t *testing.T) {
	ctx := context.Background()
	const limit = 2
	cluster := redistopo.StartCluster(t, 3)
	link := redistopo.NewClusterLink(t, cluster, 5*time.Millisecond)
	home := storeOn(t, "c", redis.NewClusterClient(&redis.ClusterOptions{Addrs: link.Addrs(), MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 2 * time.Second}))
	d := deploy(NewHomes(1, "c", nil, nil), 1, store(t, "a", redistopo.StartSingle(t).Addr), home)
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

// While GB moves from a to b, a region already on the new table counts in
// both homes and one still on the old counts in a: a sees every admission,
// so the race admits exactly the limit; once the move ends b's windows hold
// every admission too.
func TestMovingAHomeStaysExact(t *testing.T) {
	ctx := context.Background()
	const limit = 3
	old := NewHomes(1, "b", map[string]string{"GB": "a"}, nil)
	moving := NewHomes(2, "b", map[string]string{"GB": "b"}, map[string]string{"GB": "a"})
	p := newPairWith(t, 0, old, moving)
	phone := subjects("+447400123456", "GB", "192.0.2.1", limit, 1000)
	if got := race(t, p, 30, phone); got != limit {
		t.Fatalf("admitted %d during the move, want exactly %d", got, limit)
	}
	// Every region on the new table now: b's window holds what b admitted,
	// a's everything; after the longest window b alone is enough.
	p.a = p.b
	if dec, err := p.a.Limiter().Allow(ctx, ticket(), phone); err != nil || dec.Allowed {
		t.Fatalf("after the race, a send was admitted: %+v %v", dec, err)
	}
}
