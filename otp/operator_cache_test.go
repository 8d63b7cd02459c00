package otp

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/nyaruka/phonenumbers"
)

// TestOperatorCacheIsTheLibrarys: Operator, answered from its cache for a
// number whose prefix was asked before, answers what the library answers
// for every number: mobile example numbers of every region and numbers
// sharing their first ten characters, asked in a random order.
func TestOperatorCacheIsTheLibrarys(t *testing.T) {
	rng := rand.New(rand.NewPCG(34, 10))
	var phones []Phone
	for region := range phonenumbers.GetSupportedRegions() {
		for _, typ := range []phonenumbers.PhoneNumberType{phonenumbers.MOBILE, phonenumbers.FIXED_LINE} {
			ex := phonenumbers.GetExampleNumberForType(region, typ)
			if ex == nil {
				continue
			}
			e164 := phonenumbers.Format(ex, phonenumbers.E164)
			for i := 0; i < 8; i++ {
				raw := e164
				if i > 0 { // another number: its last digits changed
					b := []byte(e164)
					for j := 0; j < 3 && len(b)-1-j > 3; j++ {
						b[len(b)-1-j] = byte('0' + rng.IntN(10))
					}
					raw = string(b) + map[bool]string{true: strconv.Itoa(i % 10), false: ""}[i == 7]
				}
				if p, err := ParsePhone(raw, ""); err == nil {
					phones = append(phones, p)
				}
			}
		}
	}
	named := 0
	for _, i := range rng.Perm(len(phones)) {
		p := phones[i]
		want, _, err := phonenumbers.GetCarrierWithPrefixForNumber(p.num, "en")
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < 2; k++ {
			if got := p.Operator(); got != want {
				t.Fatalf("%s: Operator %q, the library %q", p.E164, got, want)
			}
		}
		if want != "" {
			named++
		}
	}
	if named < 100 {
		t.Fatalf("only %d of %d numbers have an operator: the test checks too little", named, len(phones))
	}
	t.Logf("%d numbers, %d with an operator", len(phones), named)
}

// BenchmarkOperator: Operator of new numbers, in order (so a hundred share
// each ten-character prefix, as make bench-http's fresh numbers do): US
// numbers, which have no operator in the prefix data, and Nigerian ones,
// which name Glo.
func BenchmarkOperator(b *testing.B) {
	for _, tt := range []struct{ name, format string }{{"US", "+1415%07d"}, {"NG", "+234805%07d"}} {
		b.Run(tt.name, func(b *testing.B) {
			phones := make([]Phone, 100_000)
			for i := range phones {
				p, err := ParsePhone(fmt.Sprintf(tt.format, 2_000_000+i), "")
				if err != nil {
					b.Fatal(err)
				}
				phones[i] = p
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				_ = phones[i%len(phones)].Operator()
			}
		})
	}
}
