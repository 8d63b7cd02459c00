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
		for i := 0; i < 12; i++ {
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

// sameNumber says how two parsed numbers differ, "" when they do not:
// every field, set or not.
func sameNumber(a, b *phonenumbers.PhoneNumber) string {
	show := func(n *phonenumbers.PhoneNumber) string {
		s := ""
		for _, v := range []any{n.CountryCode, n.NationalNumber, n.Extension, n.RawInput, n.PreferredDomesticCarrierCode,
			n.ItalianLeadingZero, n.NumberOfLeadingZeros, n.CountryCodeSource} {
			s += numField(v) + " "
		}
		return s
	}
	if sa, sb := show(a), show(b); sa != sb {
		return sa + "!= " + sb
	}
	return ""
}

func numField(v any) string {
	switch p := v.(type) {
	case *int32:
		if p != nil {
			return strconv.Itoa(int(*p))
		}
	case *uint64:
		if p != nil {
			return strconv.FormatUint(*p, 10)
		}
	case *string:
		if p != nil {
			return strconv.Quote(*p)
		}
	case *bool:
		if p != nil {
			return strconv.FormatBool(*p)
		}
	case *phonenumbers.PhoneNumber_CountryCodeSource:
		if p != nil {
			return p.String()
		}
	default:
		panic("numField: a field type not listed")
	}
	return "-"
}

func checkParseE164(t *testing.T, raw, region string) bool {
	t.Helper()
	got, ok := parseE164(raw, region)
	if !ok {
		return false
	}
	want, err := phonenumbers.Parse(raw, region)
	if err != nil {
		t.Fatalf("parseE164(%q, %q) read a number; the library: %v", raw, region, err)
	}
	if d := sameNumber(got, want); d != "" {
		t.Fatalf("parseE164(%q, %q): %s", raw, region, d)
	}
	return true
}

// TestParseE164IsTheLibrarys: every number parseE164 reads it reads as
// phonenumbers.Parse does, field by field, in every default region (and
// none, and ones that do not exist): every region's and network's example
// numbers and numbers around them, random digit strings of every length,
// and national prefixes and leading zeros after the country code.
func TestParseE164IsTheLibrarys(t *testing.T) {
	rng := rand.New(rand.NewPCG(34, 164))
	var inputs []string
	for region := range phonenumbers.GetSupportedRegions() {
		for _, typ := range []phonenumbers.PhoneNumberType{phonenumbers.FIXED_LINE, phonenumbers.MOBILE, phonenumbers.TOLL_FREE} {
			if n := phonenumbers.GetExampleNumberForType(region, typ); n != nil {
				e := phonenumbers.Format(n, phonenumbers.E164)
				cc := strconv.Itoa(int(n.GetCountryCode()))
				nsn := e[1+len(cc):]
				inputs = append(inputs, e, "+"+cc+"0"+nsn, "+"+cc+"00"+nsn, "+"+cc+"1"+nsn, "+"+cc+nsn[:len(nsn)-1],
					"+"+cc+nsn+"5", "+"+cc+"8"+nsn, "+"+cc+"0")
			}
		}
	}
	for cc := range phonenumbers.GetSupportedCallingCodes() {
		if n := phonenumbers.GetExampleNumberForNonGeoEntity(cc); n != nil {
			inputs = append(inputs, phonenumbers.Format(n, phonenumbers.E164))
		}
		for l := 0; l <= 18; l++ {
			var b strings.Builder
			b.WriteString("+" + strconv.Itoa(cc))
			for j := 0; j < l; j++ {
				b.WriteByte(byte('0' + rng.IntN(10)))
			}
			inputs = append(inputs, b.String())
		}
	}
	for i := 0; i < 3000; i++ {
		var b strings.Builder
		b.WriteByte('+')
		for j := rng.IntN(22); j >= 0; j-- {
			b.WriteByte(byte('0' + rng.IntN(10)))
		}
		inputs = append(inputs, b.String())
	}
	regions := []string{"", "US", "GB", "001", "XX", "IT", "KZ", "AR"}
	read := 0
	for _, raw := range inputs {
		for _, region := range regions {
			if checkParseE164(t, raw, region) {
				read++
			}
		}
	}
	if read < len(inputs) {
		t.Fatalf("parseE164 read only %d of %d inputs in %d regions: the test checks too little", read, len(inputs), len(regions))
	}
	t.Logf("%d of %d readings taken by parseE164, each the library's", read, len(inputs)*len(regions))
}

// FuzzParseE164: whatever parseE164 reads, the library reads alike.
func FuzzParseE164(f *testing.F) {
	for _, s := range []string{"+14155552671", "+12065550100", "+447400123456", "+4407400123456", "+390612345678",
		"+80012345678", "+882345678901", "+79123456789", "+5491123456789", "+52115512345678", "+2348051234567"} {
		f.Add(s, "US")
		f.Add(s, "")
	}
	f.Fuzz(func(t *testing.T, raw, region string) {
		if len(raw) > maxPhoneInput {
			return
		}
		checkParseE164(t, raw, strings.ToUpper(region))
	})
}
