package region

import (
	"context"
	"testing"
	"time"

	"smsgw/otp"
)

// TestWithdrawThroughAnyRegion: a verification's code, kept in its number's
// home, is withdrawn through another region (a cancel answered there), only
// while it is still that verification's; a code issued under fallback
// while the home was cut is withdrawn from the fallback store.
func TestWithdrawThroughAnyRegion(t *testing.T) {
	ctx := context.Background()
	p := newPair(t, 5)
	const us = "+14155550100" // homed in b
	code := func(vid string) otp.StoredCode {
		return otp.StoredCode{MAC: []byte("mac-" + vid), Sealed: []byte(vid + "|sealed")}
	}
	if _, err := p.a.Codes().Issue(ctx, us, code("v1"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if ok, err := p.a.Codes().Withdraw(ctx, us, []byte("v2|")); err != nil || ok {
		t.Fatalf("another verification's prefix withdrew the code: %v %v", ok, err)
	}
	if _, ok, err := p.b.Codes().Pending(ctx, us); err != nil || !ok {
		t.Fatalf("the code at home after a withdraw of another verification: pending %v, %v", ok, err)
	}
	if ok, err := p.a.Codes().Withdraw(ctx, us, []byte("v1|")); err != nil || !ok {
		t.Fatalf("withdraw through a: %v %v, want the code withdrawn", ok, err)
	}
	if _, ok, err := p.b.Codes().Pending(ctx, us); err != nil || ok {
		t.Fatalf("the code at home after its withdraw: pending %v, %v", ok, err)
	}

	p.aToB.Cut()
	if _, err := p.a.Codes().Issue(ctx, us, code("v3"), time.Minute); err != nil {
		t.Fatalf("issue under fallback: %v", err)
	}
	if ok, err := p.a.Codes().Withdraw(ctx, us, []byte("v3|")); err != nil || !ok {
		t.Fatalf("withdraw of a code issued under fallback, home cut: %v %v", ok, err)
	}
	if _, ok, err := p.a.Codes().Pending(ctx, us); err != nil || ok {
		t.Fatalf("the fallback code after its withdraw: pending %v, %v", ok, err)
	}
}
