package pumping

import (
	"testing"
	"time"
)

func TestDecideArgsPositions(t *testing.T) {
	a := decideArgs{now: "", bucket: time.Hour, buckets: 24, mode: modeShadow, ratio: 1.5, hourFactor: 4,
		restrictFor: time.Minute, phone: "+447911123456", netid: "n", record: true, probeEvery: time.Second,
		signal: "?", tail: "3456", returningDays: 30,
		subjects: []decideSubject{{"r", 5, ""}, {"m", int64(20000), "0 1000000"}}}
	argv := a.argv()
	for _, tc := range []struct {
		name string
		pos  int // 1-based, as decide.lua reads it
		want any
	}{
		{"mode", 4, 1},
		{"ratio", 5, "1.5"},
		{"subjects", 10, 2},
		{"record", 11, "1"},
		{"signal", 13, "?"},
		{"tail days", 14, "3456 30"},
		{"first kind", decideArgSubjects, "r"},
		{"second p2", decideArgSubjects + 5, "0 1000000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if argv[tc.pos-1] != tc.want {
				t.Fatalf("ARGV[%d] = %v, want %v", tc.pos, argv[tc.pos-1], tc.want)
			}
		})
	}
	if len(argv) != decideArgSubjects-1+3*2 {
		t.Fatalf("len(argv) = %d", len(argv))
	}
}

func TestParseDecideReply(t *testing.T) {
	reply := func(n ...int64) any {
		out := make([]any, len(n))
		for i, x := range n {
			out[i] = x
		}
		return out
	}
	for _, tc := range []struct {
		name string
		v    any
		ok   bool
	}{
		{"counted", reply(1, 0, 0, 0, 0, 2, 8, 10, 500, 1, -1, 1), true},
		{"refused", reply(0, 2, 11, 10, 3000, 2, 11, 10, 500, 0, -1, 0), true},
		{"refused without a rule", reply(0, 0, 0, 0, 0, 0, 0, 0, 500, 0, -1, 0), false},
		{"rule out of range", reply(0, 3, 0, 0, 0, 0, 0, 0, 500, 0, -1, 0), false},
		{"unknown verdict", reply(4, 1, 0, 0, 0, 0, 0, 0, 500, 0, -1, 0), false},
		{"short", reply(1, 0, 0), false},
		{"not integers", []any{"1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := parseDecideReply(tc.v, 2)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok %v", err, tc.ok)
			}
			if tc.name == "refused" && (r.verdict != verdictRefused || r.rule != 2 || r.retry != 3*time.Second || r.bucket != 500) {
				t.Fatalf("read %+v", r)
			}
		})
	}
}
