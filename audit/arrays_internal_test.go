package audit

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"smsgw/otp"
)

// reflectedArrays is arrays as it was before its columns had their own
// types: slices of pointers (and an []int32) that pgx encodes by
// reflection, the reference TestArraysEncodeAsReflected holds arrays to.
func reflectedArrays(events []otp.AuditEvent) []any {
	n := len(events)
	ids, kinds, outcomes, requests := make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
	times := make([]*time.Time, n)
	ips := make([]*netip.Addr, n)
	phones, reasons, providers, messages, keys := make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
	counts, lasts, subjects := make([]int32, n), make([]*time.Time, n), make([]*string, n)
	segments, segs := make([]*int16, n), make([]int16, n)
	orNull := func(s *string) *string {
		if *s == "" {
			return nil
		}
		return s
	}
	for i := range events {
		e := &events[i]
		ids[i], times[i], kinds[i], outcomes[i], requests[i] = &e.ID, &e.Time, &e.Kind, &e.Outcome, &e.RequestID
		if e.ClientIP.IsValid() {
			ips[i] = &e.ClientIP
		}
		phones[i], reasons[i], providers[i], messages[i], keys[i] = orNull(&e.Phone), orNull(&e.Reason), orNull(&e.Provider), orNull(&e.MessageID), orNull(&e.APIKey)
		counts[i], subjects[i] = int32(min(e.Requests(), 1<<31-1)), orNull(&e.Subject)
		if e.Rollup() {
			lasts[i] = &e.LastAt
		}
		if e.Segments > 0 {
			segs[i] = int16(min(e.Segments, 1<<15-1))
			segments[i] = &segs[i]
		}
	}
	return []any{ids, times, kinds, outcomes, requests, phones, ips, reasons, providers, messages, keys, counts, lasts, subjects, segments}
}

// columnOIDs are the array types fromArrays casts its parameters to.
var columnOIDs = []uint32{pgtype.TextArrayOID, pgtype.TimestamptzArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID,
	pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.InetArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID,
	pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.Int4ArrayOID, pgtype.TimestamptzArrayOID, pgtype.TextArrayOID,
	pgtype.Int2ArrayOID}

// TestArraysEncodeAsReflected: every column of arrays encodes to the bytes
// pgx wrote for the reflected slices, in the binary format the extended
// protocol uses, in the text format, and without a known type (the simple
// protocol's), for groups of random rows: quotes, backslashes, braces,
// commas, "NULL", non-ASCII and empty strings; IPv4, IPv6, mapped and
// missing addresses; times in other zones, before 2000 and zero; rollups,
// large counts and segments.
func TestArraysEncodeAsReflected(t *testing.T) {
	rng := rand.New(rand.NewPCG(34, 3))
	pieces := []string{"", "a", `"`, `\`, "{", "}", ",", " ", "NULL", "null", "é", "日本", "+12025550123", "phone:1m",
		"sending", "accepted", "0f8fe1b2-3c4d-4e5f-8a9b-0c1d2e3f4a5b", "\t", "'", "x y"}
	str := func() string {
		var b bytes.Buffer
		for range rng.IntN(4) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	zones := []*time.Location{time.UTC, time.FixedZone("x", -5*3600-1800), time.FixedZone("y", 14*3600)}
	when := func() time.Time {
		switch rng.IntN(8) {
		case 0:
			return time.Time{}
		case 1:
			return time.Date(1970+rng.IntN(40), 1, 1, 0, 0, 0, rng.IntN(1e9), zones[rng.IntN(3)])
		}
		return time.Unix(1_700_000_000+rng.Int64N(1e8), rng.Int64N(1e9)).In(zones[rng.IntN(3)])
	}
	addrs := []netip.Addr{{}, netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("2001:db8::1"),
		netip.MustParseAddr("::ffff:198.51.100.2"), netip.MustParseAddr("0.0.0.0"), netip.MustParseAddr("::")}
	event := func() otp.AuditEvent {
		e := otp.AuditEvent{ID: str(), Time: when(), Kind: str(), Outcome: str(), RequestID: str(), Phone: str(),
			ClientIP: addrs[rng.IntN(len(addrs))], Reason: str(), Provider: str(), MessageID: str(), APIKey: str(),
			Subject: str()}
		switch rng.IntN(4) {
		case 0:
			e.Count = rng.IntN(3)
		case 1:
			e.Count = rng.IntN(1 << 34)
			e.LastAt = when()
		}
		switch rng.IntN(3) {
		case 0:
			e.Segments = rng.IntN(5)
		case 1:
			e.Segments = rng.IntN(1 << 17)
		}
		return e
	}
	m := pgtype.NewMap()
	for round := range 400 {
		events := make([]otp.AuditEvent, rng.IntN(6))
		if round == 0 {
			events = nil
		}
		for i := range events {
			events[i] = event()
		}
		got, want := arrays(events), reflectedArrays(events)
		for c := range columns {
			for _, way := range []struct {
				oid    uint32
				format int16
			}{{columnOIDs[c], pgtype.BinaryFormatCode}, {columnOIDs[c], pgtype.TextFormatCode}, {0, pgtype.TextFormatCode}} {
				g, gErr := m.Encode(way.oid, way.format, got[c], nil)
				w, wErr := m.Encode(way.oid, way.format, want[c], nil)
				if fmt.Sprint(gErr) != fmt.Sprint(wErr) || !bytes.Equal(g, w) || (g == nil) != (w == nil) {
					t.Fatalf("round %d, column %s, oid %d format %d:\n got %q, %v\nwant %q, %v",
						round, columns[c], way.oid, way.format, g, gErr, w, wErr)
				}
			}
		}
	}
}

// BenchmarkArraysEncode is a group of 32 sends' final rows encoded as pgx
// encodes a statement's parameters, by arrays and by the reflected slices
// it replaced (ns and allocations a group).
func BenchmarkArraysEncode(b *testing.B) {
	events := make([]otp.AuditEvent, 32)
	for i := range events {
		events[i] = otp.AuditEvent{ID: fmt.Sprintf("0f8fe1b2-3c4d-4e5f-8a9b-0c1d2e3f%04x", i), Time: time.Now(),
			Kind: "send", Outcome: "accepted", RequestID: fmt.Sprintf("req-%d", i), Phone: "+12025550123",
			ClientIP: netip.MustParseAddr("203.0.113.7"), Provider: "fake", MessageID: fmt.Sprintf("m%d", i), Segments: 1}
	}
	for _, way := range []struct {
		name   string
		arrays func([]otp.AuditEvent) []any
	}{{"arrays", arrays}, {"reflected", reflectedArrays}} {
		b.Run(way.name, func(b *testing.B) {
			m := pgtype.NewMap()
			var buf []byte
			b.ReportAllocs()
			for b.Loop() {
				for c, a := range way.arrays(events) {
					var err error
					if buf, err = m.Encode(columnOIDs[c], pgtype.BinaryFormatCode, a, buf[:0]); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
