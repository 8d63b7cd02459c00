package otp

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/nyaruka/phonenumbers"
)

// libraryKind is what parseValid asked before numberKind.
func libraryKind(num *phonenumbers.PhoneNumber) (phonenumbers.PhoneNumberType, string) {
	return phonenumbers.GetNumberType(num), phonenumbers.GetRegionCodeForNumber(num)
}

func checkKind(t *testing.T, num *phonenumbers.PhoneNumber) {
	t.Helper()
	wt, wr := libraryKind(num)
	gt, gr := numberKind(num)
	if gt != wt || gr != wr {
		t.Fatalf("+%d %d (leading zeros %d): numberKind %v %q, the library %v %q",
			num.GetCountryCode(), num.GetNationalNumber(), num.GetNumberOfLeadingZeros(), gt, gr, wt, wr)
	}
}

// TestNumberKindIsTheLibrarys: for every region's and network's example
// number of every type, and numbers around each (the same length and
// shorter and longer, near it and at random), numberKind answers what
// phonenumbers.GetNumberType and GetRegionCodeForNumber answer.
func TestNumberKindIsTheLibrarys(t *testing.T) {
	rng := rand.New(rand.NewPCG(34, 34))
	var examples []*phonenumbers.PhoneNumber
	types := []phonenumbers.PhoneNumberType{phonenumbers.FIXED_LINE, phonenumbers.MOBILE, phonenumbers.TOLL_FREE,
		phonenumbers.PREMIUM_RATE, phonenumbers.SHARED_COST, phonenumbers.VOIP, phonenumbers.PERSONAL_NUMBER,
		phonenumbers.PAGER, phonenumbers.UAN, phonenumbers.VOICEMAIL}
	for region := range phonenumbers.GetSupportedRegions() {
		for _, typ := range types {
			if n := phonenumbers.GetExampleNumberForType(region, typ); n != nil {
				examples = append(examples, n)
			}
		}
	}
	for cc := range phonenumbers.GetSupportedCallingCodes() {
		if n := phonenumbers.GetExampleNumberForNonGeoEntity(cc); n != nil {
			examples = append(examples, n)
		}
	}
	if len(examples) < 1000 {
		t.Fatalf("only %d example numbers", len(examples))
	}
	checked := 0
	for _, ex := range examples {
		e164 := phonenumbers.Format(ex, phonenumbers.E164)
		cc := strconv.Itoa(int(ex.GetCountryCode()))
		nsn := e164[1+len(cc):]
		variants := []string{nsn}
		for i := 0; i < 40; i++ {
			d := []byte(nsn)
			// Change one to three digits, anywhere.
			for j := 0; j <= rng.IntN(3); j++ {
				d[rng.IntN(len(d))] = byte('0' + rng.IntN(10))
			}
			variants = append(variants, string(d))
		}
		for l := max(1, len(nsn)-3); l <= len(nsn)+3 && l <= 17; l++ {
			for i := 0; i < 5; i++ {
				var b strings.Builder
				for j := 0; j < l; j++ {
					b.WriteByte(byte('0' + rng.IntN(10)))
				}
				variants = append(variants, b.String())
			}
		}
		for _, v := range variants {
			num, err := phonenumbers.Parse("+"+cc+v, "")
			if err != nil {
				continue
			}
			checkKind(t, num)
			checked++
		}
	}
	t.Logf("%d numbers from %d examples", checked, len(examples))
}

// FuzzNumberKind: whatever ParsePhone's parser reads, numberKind answers
// as the library does.
func FuzzNumberKind(f *testing.F) {
	for _, s := range []string{"+14155552671", "+16502530001", "+447400123456", "+441534123456", "(415) 555-2671",
		"+80012345678", "+882345678901", "+79123456789", "+77012345678", "+390612345678", "+2250712345678"} {
		f.Add(s, "US")
	}
	f.Fuzz(func(t *testing.T, raw, region string) {
		if len(raw) > maxPhoneInput {
			return
		}
		num, err := phonenumbers.Parse(raw, strings.ToUpper(region))
		if err != nil {
			return
		}
		checkKind(t, num)
	})
}
