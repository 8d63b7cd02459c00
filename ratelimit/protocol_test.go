package ratelimit

import (
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
		{"allow tight beyond the windows", func() error {
			_, err := parseAllowReply([]any{int64(1), int64(5), int64(7), int64(3), int64(0), int64(0), int64(0)}, 6)
			return err
		}, true},
		{"allow short", func() error { _, err := parseAllowReply([]any{int64(1), int64(5)}, 6); return err }, true},
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
	if argv[allowArgNow-1] != "" || argv[allowArgTicket-1] != "t" || argv[allowArgLease-1] != int64(1_000_000) {
		t.Fatalf("argv = %v", argv)
	}
	phone, ip := benchSubjects("+15550100", "10.0.0.1")
	argv = allowArgs{now: time.UnixMicro(42), subjects: []otp.Subject{phone, ip}}.argv()
	// phoneRules then ipRules: n, longest, then (window_us, max) pairs.
	if argv[allowArgNow-1] != int64(42) || argv[allowArgSubjects-1] != len(phoneRules) {
		t.Fatalf("argv = %v", argv)
	}
	if want := allowArgSubjects - 1 + 2*2 + 2*(len(phoneRules)+len(ipRules)); len(argv) != want {
		t.Fatalf("len(argv) = %d, want %d", len(argv), want)
	}
}
