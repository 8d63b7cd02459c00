package audit_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"smsgw/audit"
	"smsgw/internal/testenv"
	"smsgw/otp"
)

// TestSendingThenFinalInAnyOrder: a send's final outcome replaces its
// "sending", once, whichever arrives first and however often each is written
// again; a final outcome never goes back to sending.
func TestSendingThenFinalInAnyOrder(t *testing.T) {
	pool := testenv.Pool(t)
	ctx := context.Background()
	sending := event(1)
	sending.Outcome, sending.Provider, sending.MessageID = otp.OutcomeSending, "", ""
	final := event(1)
	final.ID, final.Time = sending.ID, sending.Time
	for _, tc := range []struct {
		name    string
		batches [][]otp.AuditEvent
	}{
		{"in order", [][]otp.AuditEvent{{sending}, {final}}},
		{"one batch", [][]otp.AuditEvent{{sending, final}}},
		{"final first, then a replayed sending", [][]otp.AuditEvent{{final}, {sending}, {sending, final}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := pool.Exec(ctx, "DELETE FROM audit_log"); err != nil {
				t.Fatal(err)
			}
			for _, b := range tc.batches {
				if err := audit.Write(ctx, pool, b); err != nil {
					t.Fatal(err)
				}
			}
			var outcome, msgID string
			var n int
			if err := pool.QueryRow(ctx, "SELECT outcome, provider_message_id, count(*) OVER () FROM audit_log").Scan(&outcome, &msgID, &n); err != nil {
				t.Fatal(err)
			}
			if n != 1 || outcome != otp.OutcomeSent || msgID != final.MessageID {
				t.Fatalf("%d rows, outcome %q, message id %q", n, outcome, msgID)
			}
		})
	}
}

// TestPoisonedRowIsSetApart: a row Postgres refuses for its data (a NUL
// byte in a provider's message id) is split out of its batch into the dead
// letters, whole, counted and never holds up the other rows: not in a direct
// write, and not in a spool replay.
func TestPoisonedRowIsSetApart(t *testing.T) {
	for _, viaSpool := range []bool{false, true} {
		name := map[bool]string{false: "direct", true: "replayed from the spool"}[viaSpool]
		t.Run(name, func(t *testing.T) {
			through, direct, proxy := proxied(t)
			dir := t.TempDir()
			reg := prometheus.NewRegistry()
			w := newWriter(t, through, audit.Options{SpoolDir: dir, WriteTimeout: 5 * time.Second, Metrics: reg})
			ctx := context.Background()
			if viaSpool {
				proxy.Cut()
			}
			bad := event(0)
			// The spool carries rows as JSON, where invalid UTF-8 becomes
			// U+FFFD; a NUL byte survives it.
			bad.MessageID = "SM\x00bad"
			if !viaSpool {
				bad.MessageID += "\xff"
			}
			errs := make(chan error, 100)
			for i := 1; i <= 99; i++ {
				go func() { errs <- w.Record(ctx, event(i)) }()
				if i == 50 {
					go func() { errs <- w.Record(ctx, bad) }()
				}
			}
			for i := 0; i < 100; i++ {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			proxy.Heal()
			testenv.WaitFor(t, 0, "the 99 good rows", func() bool { return count(t, direct) == 99 })
			testenv.WaitFor(t, 0, "the dead letter", func() bool { return testenv.Metric(t, reg, "smsgw_audit_rows_dead_lettered_total") == 1 })
			// Rows keep flowing after it.
			if err := w.Record(ctx, event(100)); err != nil {
				t.Fatal(err)
			}
			testenv.WaitFor(t, 0, "a row after the poisoned one", func() bool { return count(t, direct) == 100 })
			letters := readDeadLetters(t, dir)
			if len(letters) != 1 {
				t.Fatalf("%d dead letters, want 1", len(letters))
			}
			d := letters[0]
			if d.SQLState == "" || d.Row.ID != bad.ID || d.Row.Phone != bad.Phone {
				t.Fatalf("dead letter %+v", d)
			}
			exact := d.Row.MessageID
			if raw, ok := d.Raw["provider_message_id"]; ok {
				exact, _ = base64Decode(raw)
			}
			if exact != bad.MessageID {
				t.Fatalf("dead letter lost the exact message id: %q", exact)
			}
		})
	}
}

type deadLetterLine struct {
	SQLState string            `json:"sqlstate"`
	Row      otp.AuditEvent    `json:"row"`
	Raw      map[string]string `json:"raw"`
}

func readDeadLetters(t *testing.T, dir string) []deadLetterLine {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, audit.DeadLetterFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []deadLetterLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var d deadLetterLine
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("dead letter %q: %v", sc.Text(), err)
		}
		out = append(out, d)
	}
	return out
}

// TestNotDurableFailsClosedAndRecovers: with Postgres away and the spool
// past its hard cap, Record fails and Accepting (the readiness check) says
// why; once Postgres is back both recover by themselves, and the rows kept
// in memory meanwhile are stored.
func TestNotDurableFailsClosedAndRecovers(t *testing.T) {
	through, direct, proxy := proxied(t)
	proxy.Cut()
	w := newWriter(t, through, audit.Options{SpoolDir: t.TempDir(), SpoolMaxBytes: 16 << 10, WriteTimeout: 200 * time.Millisecond,
		RetryEvery: 20 * time.Millisecond})
	ctx := context.Background()
	var err error
	acked := 0
	for i := 0; err == nil; i++ {
		if i > 100000 {
			t.Fatal("the spool never refused a row")
		}
		if err = w.Record(ctx, event(i)); err == nil {
			acked++
		}
	}
	if !errors.Is(err, audit.ErrNotDurable) {
		t.Fatalf("Record past the hard cap: %v", err)
	}
	if err := w.Ready(ctx); !errors.Is(err, audit.ErrNotDurable) {
		t.Fatalf("Ready while nothing is durable: %v", err)
	}
	proxy.Heal()
	testenv.WaitFor(t, 0, "Accepting to recover", func() bool { return w.Accepting() == nil })
	// Every row, the refused one too, reaches Postgres.
	testenv.WaitFor(t, 0, "every row", func() bool { return count(t, direct) == acked+1 })
}

// TestReplicasShareASpoolDirAndAdoptOrphans: writers started with one
// spool_dir each take their own spool; the rows a dead one left are
// replayed by one still running.
func TestReplicasShareASpoolDirAndAdoptOrphans(t *testing.T) {
	through, direct, proxy := proxied(t)
	dir := t.TempDir()
	proxy.Cut()
	opts := audit.Options{SpoolDir: dir, WriteTimeout: 200 * time.Millisecond, AdoptEvery: 50 * time.Millisecond}
	first, err := audit.NewWriter(through, opts, quiet)
	if err != nil {
		t.Fatal(err)
	}
	stopFirst := start(t, first)
	second := newWriter(t, through, opts)
	ctx := context.Background()
	for i := 0; i < 20; i++ {
		if err := first.Record(ctx, event(i)); err != nil {
			t.Fatal(err)
		}
		if err := second.Record(ctx, event(100+i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, sub := range []string{"replica-0", "replica-1"} {
		if m, _ := filepath.Glob(filepath.Join(dir, sub, "spool-*.log")); len(m) == 0 {
			t.Fatalf("no spool segments in %s", sub)
		}
	}
	// The first replica goes away with its rows spooled (Postgres is still
	// down, so it cannot hand them over).
	stopFirst()
	first.Close(ctx)
	proxy.Heal()
	testenv.WaitFor(t, 0, "both spools in Postgres", func() bool { return count(t, direct) == 40 })
	testenv.WaitFor(t, 0, "the orphaned spool to empty", func() bool { return spoolFiles(t, dir) == 0 })
	_ = second
}

func base64Decode(s string) (string, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	return string(b), err
}

// TestSpoolOfAnEarlierVersionIsReplayed: a spool an older smsgw left (rows
// in its short JSON form, segments directly in spool_dir) is adopted and
// replayed after an upgrade.
func TestSpoolOfAnEarlierVersionIsReplayed(t *testing.T) {
	pool := testenv.Pool(t)
	dir := t.TempDir()
	id := newUUID()
	line := fmt.Sprintf(`{"id":%q,"t":"2026-11-01T10:00:00Z","k":"send","o":"sent","r":"req-old","p":"+14155552671","ip":"192.0.2.1","pv":"fake","m":"FAKE9"}`, id)
	seg := fmt.Sprintf("%08x %s\n", crc32.ChecksumIEEE([]byte(line)), line)
	if err := os.WriteFile(filepath.Join(dir, "spool-00000000000000000001.log"), []byte(seg), 0o600); err != nil {
		t.Fatal(err)
	}
	newWriter(t, pool, audit.Options{SpoolDir: dir, AdoptEvery: 50 * time.Millisecond})
	testenv.WaitFor(t, 0, "the old row", func() bool { return count(t, pool) == 1 })
	var phone, ip, msgID string
	if err := pool.QueryRow(context.Background(), "SELECT phone_e164, host(client_ip), provider_message_id FROM audit_log WHERE id = $1", id).
		Scan(&phone, &ip, &msgID); err != nil {
		t.Fatal(err)
	}
	if phone != "+14155552671" || ip != "192.0.2.1" || msgID != "FAKE9" {
		t.Fatalf("old row: %s %s %s", phone, ip, msgID)
	}
}

// TestRecordTwiceStoresOnce: a row the writer sends a second time (the
// first write committed after its timeout, say) is stored once: the fast
// COPY fails on it and the group is written again, skipping it.
func TestRecordTwiceStoresOnce(t *testing.T) {
	pool := testenv.Pool(t)
	w := newWriter(t, pool, audit.Options{WriteTimeout: time.Minute})
	ctx := context.Background()
	e, other := event(1), event(2)
	for _, batch := range [][]otp.AuditEvent{{e}, {e, other}} {
		errs := make(chan error, len(batch))
		for _, row := range batch {
			go func() { errs <- w.Record(ctx, row) }()
		}
		for range batch {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := count(t, pool); n != 2 {
		t.Fatalf("%d rows, want 2", n)
	}
}

// TestFinishReplacesSendingThroughTheWriter: the writer's final outcomes,
// gathered for a while and written by one UPDATE, replace "sending"; one
// whose row is not stored as "sending" (its first row never reached
// Postgres, or it is finished twice) still ends as exactly one final row.
func TestFinishReplacesSendingThroughTheWriter(t *testing.T) {
	pool := testenv.Pool(t)
	w := newWriter(t, pool, audit.Options{WriteTimeout: time.Minute, FinalEvery: 20 * time.Millisecond})
	ctx := context.Background()
	stored, missing, twice := event(1), event(2), event(3)
	for _, e := range []otp.AuditEvent{stored, twice} {
		first := e
		first.Outcome, first.Provider, first.MessageID = otp.OutcomeSending, "", ""
		if err := w.Record(ctx, first); err != nil {
			t.Fatal(err)
		}
	}
	w.Finish(stored)
	w.Finish(missing)
	w.Finish(twice)
	w.Finish(twice)
	outcomes := func() map[string]string {
		rows, err := pool.Query(ctx, "SELECT id::text, outcome || '/' || coalesce(provider_message_id, '') FROM audit_log")
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for rows.Next() {
			var id, o string
			if err := rows.Scan(&id, &o); err != nil {
				t.Fatal(err)
			}
			got[id] = o
		}
		return got
	}
	want := map[string]string{}
	for _, e := range []otp.AuditEvent{stored, missing, twice} {
		want[e.ID] = e.Outcome + "/" + e.MessageID
	}
	testenv.WaitFor(t, 0, "every final outcome", func() bool { return fmt.Sprint(outcomes()) == fmt.Sprint(want) })
	if n := count(t, pool); n != 3 {
		t.Fatalf("%d rows, want 3", n)
	}
}
