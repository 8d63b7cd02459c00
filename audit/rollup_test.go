package audit_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"smsgw/audit"
	"smsgw/internal/testenv"
	"smsgw/otp"
)

// refusal is the i-th refused send of a flood, at.
func refusal(i int, at time.Time, phone string) otp.AuditEvent {
	return otp.AuditEvent{ID: newUUID(), Time: at, Kind: otp.KindSend, Outcome: otp.ERateLimited,
		RequestID: fmt.Sprintf("req-%d", i), Phone: phone, ClientIP: netip.MustParseAddr("203.0.113.7"), Reason: "phone:1m"}
}

// minuteStart is the start of the current minute, or of the next when this
// one is nearly over, so a flood of a few seconds stays in one minute.
func minuteStart() time.Time {
	now := time.Now().UTC()
	m := now.Truncate(time.Minute)
	if now.Sub(m) > 40*time.Second {
		m = m.Add(time.Minute)
	}
	return m
}

type auditRow struct {
	count            int
	subject, phone   string
	lastAt           *time.Time
	createdAt        time.Time
	hasIP, hasLastAt bool
}

func rows(t *testing.T, pool *pgxpool.Pool) []auditRow {
	t.Helper()
	r, err := pool.Query(context.Background(), `SELECT count, coalesce(subject, ''), coalesce(phone_e164, ''), last_at, created_at, client_ip IS NOT NULL FROM audit_log ORDER BY created_at, count`)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []auditRow
	for r.Next() {
		var a auditRow
		if err := r.Scan(&a.count, &a.subject, &a.phone, &a.lastAt, &a.createdAt, &a.hasIP); err != nil {
			t.Fatal(err)
		}
		a.hasLastAt = a.lastAt != nil
		out = append(out, a)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// sumCount is how many answers audit_log counts, rollups included.
func sumCount(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	return queryInt(t, pool, "SELECT coalesce(sum(count), 0) FROM audit_log")
}

// TestRollups: answers that texted nobody have rows of their own until their
// subject has had its share this minute, then one rollup row per subject,
// kind, outcome, reason and minute counts the rest; past the replica's rows
// per second, the rest fold into a rollup of any subject. Every answer is
// counted once.
func TestRollups(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		perSubject, perSecond int
		subjects, perSubjectN int
		wantPlain             int
		wantRollups           map[string]int // subject -> count
	}{
		{name: "rows until the threshold then one rollup", perSubject: 5, perSecond: 1000, subjects: 2, perSubjectN: 50,
			wantPlain: 10, wantRollups: map[string]int{"phone:+37120000000": 45, "phone:+37120000001": 45}},
		{name: "the per-second cap folds into any subject", perSubject: 20, perSecond: 10, subjects: 100, perSubjectN: 1,
			wantPlain: 10, wantRollups: map[string]int{"": 90}},
		{name: "new rollups count against the per-second cap", perSubject: 1, perSecond: 4, subjects: 3, perSubjectN: 3,
			// 2 plain rows (subjects 0 and 1), 2 rollups (subjects 0 and 1), the rest anywhere.
			wantPlain: 2, wantRollups: map[string]int{"phone:+37120000000": 2, "phone:+37120000001": 2, "": 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := testenv.Pool(t)
			w := newWriter(t, pool, audit.Options{RowsPerSubjectMinute: tc.perSubject, RowsPerSecond: tc.perSecond,
				RollupEvery: 20 * time.Millisecond})
			at := minuteStart().Add(time.Second)
			n := 0
			for s := 0; s < tc.subjects; s++ {
				for i := 0; i < tc.perSubjectN; i++ {
					phone := fmt.Sprintf("+3712000%04d", s)
					e := refusal(n, at.Add(time.Duration(n)*time.Microsecond), phone)
					w.Note(e, "phone:"+phone)
					n++
				}
			}
			testenv.WaitFor(t, 0, "every answer counted", func() bool { return sumCount(t, pool) == n })
			plain, rollups := 0, map[string]int{}
			for _, r := range rows(t, pool) {
				if !r.hasLastAt {
					if r.count != 1 || r.subject != "" {
						t.Errorf("plain row %+v: want count 1 and no subject", r)
					}
					plain++
					continue
				}
				if _, dup := rollups[r.subject]; dup {
					t.Errorf("two rollups of subject %q in one minute", r.subject)
				}
				rollups[r.subject] = r.count
				if r.lastAt.Before(r.createdAt) {
					t.Errorf("rollup %+v: last_at before created_at", r)
				}
				if r.subject == "" && (r.phone != "" || r.hasIP) {
					t.Errorf("rollup of any subject keeps a number or an address: %+v", r)
				}
			}
			if plain != tc.wantPlain {
				t.Errorf("%d plain rows, want %d", plain, tc.wantPlain)
			}
			if fmt.Sprint(rollups) != fmt.Sprint(tc.wantRollups) {
				t.Errorf("rollups %v, want %v", rollups, tc.wantRollups)
			}
		})
	}
}

// TestRollupOfOneSubjectKeepsItsNumber: a rollup of one number keeps the
// number and the address while every request had the same, so the support
// desk finds it on the phone's page.
func TestRollupOfOneSubjectKeepsItsNumber(t *testing.T) {
	pool := testenv.Pool(t)
	w := newWriter(t, pool, audit.Options{RowsPerSubjectMinute: 1, RollupEvery: 20 * time.Millisecond})
	at := minuteStart()
	for i := 0; i < 5; i++ {
		w.Note(refusal(i, at.Add(time.Duration(i)*time.Millisecond), "+37120000000"), "phone:+37120000000")
	}
	testenv.WaitFor(t, 0, "5 answers counted", func() bool { return sumCount(t, pool) == 5 })
	var phone, ip string
	var last time.Time
	if err := pool.QueryRow(context.Background(), `SELECT phone_e164, host(client_ip), last_at FROM audit_log WHERE count = 4`).Scan(&phone, &ip, &last); err != nil {
		t.Fatal(err)
	}
	if phone != "+37120000000" || ip != "203.0.113.7" || !last.Equal(at.Add(4*time.Millisecond)) {
		t.Fatalf("rollup phone %q ip %q last_at %v", phone, ip, last)
	}
}

// TestRollupSumsExactAcrossReplicas: two replicas racing on one subject,
// flushing often, each flush an upsert of absolute counts: sum(count) is
// every answer, once.
func TestRollupSumsExactAcrossReplicas(t *testing.T) {
	dsn := testenv.MigratedDatabase(t)
	pool := testenv.PoolOn(t, dsn)
	const perGoroutine, goroutines = 500, 4
	var replicas [2]*audit.Writer
	for r := range replicas {
		replicas[r] = newWriter(t, testenv.PoolOn(t, dsn), audit.Options{RollupEvery: 5 * time.Millisecond})
	}
	testenv.Race(t, len(replicas)*goroutines, func(g int) string {
		w := replicas[g%len(replicas)]
		for i := 0; i < perGoroutine; i++ {
			w.Note(refusal(i, time.Now().UTC(), "+37120000000"), "phone:+37120000000")
		}
		return ""
	})
	want := len(replicas) * goroutines * perGoroutine
	testenv.WaitFor(t, 0, "every answer counted", func() bool { return sumCount(t, pool) >= want })
	// Flushes still under way must not add to it.
	time.Sleep(50 * time.Millisecond)
	if n := sumCount(t, pool); n != want {
		t.Fatalf("sum(count) = %d, want %d", n, want)
	}
}

// TestRollupsThroughAnOutage: Postgres goes away during a flood and comes
// back: plain rows and rollups go to the spool and are replayed, and the
// rollups written again meanwhile are not counted twice.
func TestRollupsThroughAnOutage(t *testing.T) {
	through, direct, proxy := proxied(t)
	w := newWriter(t, through, audit.Options{SpoolDir: t.TempDir(), WriteTimeout: 5 * time.Second,
		RowsPerSubjectMinute: 3, RollupEvery: 10 * time.Millisecond})
	flood := func(from, n int) {
		for i := from; i < from+n; i++ {
			w.Note(refusal(i, time.Now().UTC(), "+37120000000"), "phone:+37120000000")
			if i%50 == 0 {
				time.Sleep(time.Millisecond) // let flushes interleave
			}
		}
	}
	flood(0, 500)
	testenv.WaitFor(t, 0, "500 answers counted", func() bool { return sumCount(t, direct) == 500 })
	proxy.Cut()
	flood(500, 1000)
	proxy.Heal()
	flood(1500, 500)
	testenv.WaitFor(t, 0, "2000 answers counted", func() bool { return sumCount(t, direct) >= 2000 })
	time.Sleep(50 * time.Millisecond)
	if n := sumCount(t, direct); n != 2000 {
		t.Fatalf("sum(count) = %d after the outage, want 2000", n)
	}
}
