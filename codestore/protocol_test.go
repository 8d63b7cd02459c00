package codestore

import (
	"testing"

	"smsgw/otp"
)

// The readers of the scripts' replies map every state the scripts send to
// the domain's, and refuse one they never send.
func TestParseReplies(t *testing.T) {
	tests := []struct {
		name       string
		reply      []any
		claim      bool // a claim.lua reply, else check.lua's
		wantClaim  otp.Claim
		wantAnswer string
		wantCheck  otp.CodeCheck
		wantLeft   int
		wantErr    bool
	}{
		{name: "claimed", reply: []any{int64(claimTaken), ""}, claim: true, wantClaim: otp.Claimed},
		{name: "held", reply: []any{int64(claimHeld), ""}, claim: true, wantClaim: otp.ClaimBusy},
		{name: "done", reply: []any{int64(claimDone), doneValuePrefix + "{}"}, claim: true, wantClaim: otp.ClaimDone, wantAnswer: "{}"},
		{name: "claim state unknown", reply: []any{int64(4), ""}, claim: true, wantErr: true},
		{name: "claim short", reply: []any{int64(1)}, claim: true, wantErr: true},
		{name: "nothing pending", reply: []any{int64(checkNone), int64(0)}, wantCheck: otp.CodeNone},
		{name: "approved", reply: []any{int64(checkApproved), int64(0)}, wantCheck: otp.CodeApproved},
		{name: "wrong", reply: []any{int64(checkWrong), int64(3)}, wantCheck: otp.CodeWrong, wantLeft: 3},
		{name: "check status unknown", reply: []any{int64(7), int64(0)}, wantErr: true},
		{name: "check short", reply: []any{int64(1)}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.claim {
				c, answer, err := parseClaimReply(tt.reply)
				if (err != nil) != tt.wantErr || (err == nil && (c != tt.wantClaim || string(answer) != tt.wantAnswer)) {
					t.Errorf("parseClaimReply(%v) = %v, %q, %v", tt.reply, c, answer, err)
				}
				return
			}
			c, left, err := parseCheckReply(tt.reply)
			if (err != nil) != tt.wantErr || (err == nil && (c != tt.wantCheck || left != tt.wantLeft)) {
				t.Errorf("parseCheckReply(%v) = %v, %d, %v", tt.reply, c, left, err)
			}
		})
	}
}
