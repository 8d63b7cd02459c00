package ratelimit

import (
	"slices"
	"testing"
	"time"

	"smsgw/otp"
)

// The readers of the scripts' replies refuse what the scripts never send, so
// a script and its Go side drifting apart fails loudly.
func TestParseReplies(t *testing.T) {
	tests := []struct {
		name    string
		parse   func() error
		wantErr bool
	}{
		{"allow admitted", func() error {
			r, err := parseAllowReply([]any{int64(1), int64(5), int64(2), int64(3), int64(60_000_000), int64(0), int64(0)}, 6)
			if err == nil && (!r.allowed || r.tight != 2 || r.used != 3 || r.reset != time.Minute || r.now != time.UnixMicro(5)) {
				t.Errorf("read %+v", r)
			}
			return err
		}, false},
		{"allow admitted, every window empty", func() error {
			r, err := parseAllowReply(int64(5), 6)
			if err == nil && (!r.allowed || r.tight != 0 || r.used != 1 || r.now != time.UnixMicro(5)) {
				t.Errorf("read %+v", r)
			}
			return err
		}, false},
		{"allow refused", func() error {
			r, err := parseAllowReply([]any{int64(0), int64(5), int64(1), int64(1), int64(42), int64(0), int64(0)}, 6)
			if err == nil && (r.allowed || r.tight != 1 || r.used != 1 || r.reset != 42*time.Microsecond) {
				t.Errorf("read %+v", r)
			}
			return err
		}, false},
		{"allow tight beyond the windows", func() error {
			_, err := parseAllowReply([]any{int64(1), int64(5), int64(7), int64(3), int64(0), int64(0), int64(0)}, 6)
			return err
		}, true},
		{"allow short", func() error { _, err := parseAllowReply([]any{int64(1), int64(5)}, 6); return err }, true},
		{"allow a string", func() error { _, err := parseAllowReply("5", 6); return err }, true},
		{"allow not integers", func() error {
			_, err := parseAllowReply([]any{"1", int64(5), int64(0), int64(1), int64(0), int64(0), int64(0)}, 6)
			return err
		}, true},
		{"status", func() error {
			ws, err := parseStatusReply([]any{int64(9), int64(1), int64(1000), int64(0), int64(0)}, 2)
			if err == nil && (len(ws) != 2 || ws[0].used != 1 || ws[0].reset != time.Millisecond || ws[1].used != 0) {
				t.Errorf("read %+v", ws)
			}
			return err
		}, false},
		{"status a window short", func() error { _, err := parseStatusReply([]any{int64(9), int64(1)}, 1); return err }, true},
		{"settle", func() error { _, err := parseSettleReply(int64(2)); return err }, false},
		{"settle not an integer", func() error { _, err := parseSettleReply("2"); return err }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.parse(); (err != nil) != tt.wantErr {
				t.Errorf("err = %v, want an error: %v", err, tt.wantErr)
			}
		})
	}
}

// allowArgs lays out what allow.lua reads at its allowArg* positions.
func TestAllowArgs(t *testing.T) {
	argv := allowArgs{ticket: "t", lease: time.Second}.argv()
	if argv[allowArgNow-1] != "" || argv[allowArgTicket-1] != "t" || argv[allowArgLease-1] != "1000000" {
		t.Fatalf("argv = %v", argv)
	}
	phone, ip := benchSubjects("+15550100", "10.0.0.1")
	argv = allowArgs{now: time.UnixMicro(42), subjects: []otp.Subject{phone, ip}}.argv()
	// phoneRules then ipRules: the time to live in ms, then the windows.
	want := []any{"42", "", "0",
		"3600000", "3600000000 60000000 1 600000000 5 3600000000 10",
		"3600000", "3600000000 60000000 5 600000000 30 3600000000 50"}
	if !slices.Equal(argv, want) {
		t.Fatalf("argv = %q, want %q", argv, want)
	}
	// The time to live is the longest window rounded up to a millisecond.
	odd := []otp.Rule{{Window: 1500 * time.Microsecond, Max: 1}, {Window: time.Millisecond, Max: 2}}
	argv = allowArgs{subjects: []otp.Subject{{Key: "k", Rules: odd}}}.argv()
	if argv[allowArgSubjects-1] != "2" || argv[allowArgSubjects] != "1500 1500 1 1000 2" {
		t.Fatalf("argv = %q", argv)
	}
}
