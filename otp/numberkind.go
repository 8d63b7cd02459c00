package otp

import (
	"regexp"
	"strconv"
	"sync"

	"github.com/nyaruka/phonenumbers"
)

// numberKind is phonenumbers.GetNumberType and GetRegionCodeForNumber in one
// pass over the same metadata, with the patterns compiled once. The library
// works the region out again inside GetNumberType and, for a region found by
// its full type check (the United States under +1), runs that check three
// times in all; each check builds every pattern's string and matches it
// twice (once as "possible", once as "matching"). This runs the check once
// and matches each pattern once; its answers are the library's
// (TestNumberKindIsTheLibrarys, FuzzNumberKind).
func numberKind(num *phonenumbers.PhoneNumber) (phonenumbers.PhoneNumberType, string) {
	cc := int(num.GetCountryCode())
	regions := phonenumbers.GetRegionCodesForCountryCode(cc)
	if len(regions) == 0 {
		return phonenumbers.UNKNOWN, ""
	}
	nsn := phonenumbers.GetNationalSignificantNumber(num)
	kinds := numberKinds()
	if len(regions) == 1 {
		region := regions[0]
		var k *kindMeta
		if region == phonenumbers.REGION_CODE_FOR_NON_GEO_ENTITY {
			k = kinds.nonGeo[cc]
		} else {
			k = kinds.regions[region]
		}
		return k.typeOf(nsn), region
	}
	// getRegionCodeForNumberFromRegionList, keeping the type when the full
	// check is what named the region.
	for _, region := range regions {
		k := kinds.regions[region]
		if k != nil && k.leading != nil {
			if k.leading.MatchString(nsn) {
				return k.typeOf(nsn), region
			}
		} else if t := k.typeOf(nsn); t != phonenumbers.UNKNOWN {
			return t, region
		}
	}
	return phonenumbers.UNKNOWN, ""
}

// kindDesc is one PhoneNumberDesc: its possible lengths and its pattern
// anchored as the library anchors it ("^(?:…)$").
type kindDesc struct {
	lengths []int32
	re      *regexp.Regexp
}

// match is the library's isNumberMatchingDesc: a length it lists (when it
// lists any), then the pattern.
func (d *kindDesc) match(nsn string) bool {
	if len(d.lengths) > 0 {
		found := false
		for _, l := range d.lengths {
			if int32(len(nsn)) == l {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return d.re.MatchString(nsn)
}

// kindMeta is one region's metadata as numberKind reads it, compiled on
// first use.
type kindMeta struct {
	meta *phonenumbers.PhoneMetadata
	// leading is the region's leading-digits pattern ("^(?:…)"), nil when
	// it has none.
	leading *regexp.Regexp
	once    sync.Once
	// natPrefix is its national-prefix-for-parsing pattern ("^(?:…)"),
	// nil when it has none.
	natPrefix *regexp.Regexp

	general, premium, tollFree, sharedCost, voip kindDesc
	personal, pager, uan, voicemail, fixed       kindDesc
	mobile                                       kindDesc
}

func newKindDesc(d *phonenumbers.PhoneNumberDesc) kindDesc {
	return kindDesc{lengths: d.GetPossibleLength(), re: regexp.MustCompile("^(?:" + d.GetNationalNumberPattern() + ")$")}
}

func (k *kindMeta) compile() {
	m := k.meta
	k.general, k.premium, k.tollFree = newKindDesc(m.GetGeneralDesc()), newKindDesc(m.GetPremiumRate()), newKindDesc(m.GetTollFree())
	k.sharedCost, k.voip, k.personal = newKindDesc(m.GetSharedCost()), newKindDesc(m.GetVoip()), newKindDesc(m.GetPersonalNumber())
	k.pager, k.uan, k.voicemail = newKindDesc(m.GetPager()), newKindDesc(m.GetUan()), newKindDesc(m.GetVoicemail())
	k.fixed, k.mobile = newKindDesc(m.GetFixedLine()), newKindDesc(m.GetMobile())
	if p := m.GetNationalPrefixForParsing(); p != "" {
		k.natPrefix = regexp.MustCompile("^(?:" + p + ")")
	}
}

// typeOf is the library's getNumberTypeHelper; a region without metadata
// (nil) has no type.
func (k *kindMeta) typeOf(nsn string) phonenumbers.PhoneNumberType {
	if k == nil {
		return phonenumbers.UNKNOWN
	}
	k.once.Do(k.compile)
	switch {
	case !k.general.match(nsn):
		return phonenumbers.UNKNOWN
	case k.premium.match(nsn):
		return phonenumbers.PREMIUM_RATE
	case k.tollFree.match(nsn):
		return phonenumbers.TOLL_FREE
	case k.sharedCost.match(nsn):
		return phonenumbers.SHARED_COST
	case k.voip.match(nsn):
		return phonenumbers.VOIP
	case k.personal.match(nsn):
		return phonenumbers.PERSONAL_NUMBER
	case k.pager.match(nsn):
		return phonenumbers.PAGER
	case k.uan.match(nsn):
		return phonenumbers.UAN
	case k.voicemail.match(nsn):
		return phonenumbers.VOICEMAIL
	}
	same := k.meta.GetSameMobileAndFixedLinePattern()
	if k.fixed.match(nsn) {
		if same || k.mobile.match(nsn) {
			return phonenumbers.FIXED_LINE_OR_MOBILE
		}
		return phonenumbers.FIXED_LINE
	}
	if !same && k.mobile.match(nsn) {
		return phonenumbers.MOBILE
	}
	return phonenumbers.UNKNOWN
}

// kindTables are the library's metadata by region (only the regions it
// supports, as its getMetadataForRegion) and, for the international
// networks ("001"), by calling code.
type kindTables struct {
	regions map[string]*kindMeta
	nonGeo  map[int]*kindMeta
}

var numberKinds = sync.OnceValue(func() kindTables {
	coll, err := phonenumbers.MetadataCollection()
	if err != nil {
		panic(err) // the library's own init would have failed first
	}
	supported := phonenumbers.GetSupportedRegions()
	t := kindTables{regions: map[string]*kindMeta{}, nonGeo: map[int]*kindMeta{}}
	for _, m := range coll.GetMetadata() {
		k := &kindMeta{meta: m}
		if ld := m.GetLeadingDigits(); ld != "" {
			k.leading = regexp.MustCompile("^(?:" + ld + ")")
		}
		if id := m.GetId(); id == phonenumbers.REGION_CODE_FOR_NON_GEO_ENTITY {
			t.nonGeo[int(m.GetCountryCode())] = k
		} else if supported[id] {
			t.regions[id] = k
		}
	}
	return t
})

// parseE164 is phonenumbers.Parse(raw, region) for the notation nearly
// every request uses, "+" and digits, when the library would read the
// digits after the country code as they are: ok is false whenever it
// might do more (a digit string it may not take whole, an unknown or
// zero-led country code, a national prefix its region's rules might
// strip), and the caller asks the library. It skips what the library runs
// on every input, its extension, viability and punctuation patterns, none
// of which can match "+" and digits. TestParseE164IsTheLibrarys and
// FuzzParseE164 compare the two.
func parseE164(raw, region string) (num *phonenumbers.PhoneNumber, ok bool) {
	if len(raw) < 4 || raw[0] != '+' || raw[1] == '0' {
		return nil, false
	}
	digits := raw[1:]
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return nil, false
		}
	}
	// extractCountryCode: the shortest prefix of one to three digits that
	// is a calling code.
	codes := phonenumbers.GetSupportedCallingCodes()
	cc, nsn := 0, ""
	for i := 1; i <= 3; i++ {
		c, _ := strconv.Atoi(digits[:i])
		if codes[c] {
			cc, nsn = c, digits[i:]
			break
		}
	}
	if cc == 0 || len(nsn) < phonenumbers.MIN_LENGTH_FOR_NSN || len(nsn) > phonenumbers.MAX_LENGTH_FOR_NSN {
		return nil, false
	}
	// The metadata whose national prefix the library would try to strip:
	// the number's main region's, or the default region's when that is it.
	kinds := numberKinds()
	var k *kindMeta
	switch home := phonenumbers.GetRegionCodeForCountryCode(cc); {
	case home == region:
		k = kinds.regions[region]
	case home == phonenumbers.REGION_CODE_FOR_NON_GEO_ENTITY:
		k = kinds.nonGeo[cc]
	default:
		k = kinds.regions[home]
	}
	if k != nil && k.nationalPrefix() != nil && k.nationalPrefix().MatchString(nsn) {
		return nil, false
	}
	num = &phonenumbers.PhoneNumber{}
	code := int32(cc)
	num.CountryCode = &code
	// setItalianLeadingZerosForPhoneNumber
	if len(nsn) >= 2 && nsn[0] == '0' {
		yes := true
		num.ItalianLeadingZero = &yes
		zeros := 1
		for zeros < len(nsn)-1 && nsn[zeros] == '0' {
			zeros++
		}
		if zeros != 1 {
			n := int32(zeros)
			num.NumberOfLeadingZeros = &n
		}
	}
	national, _ := strconv.ParseUint(nsn, 10, 64)
	num.NationalNumber = &national
	return num, true
}

// nationalPrefix is the region's national-prefix-for-parsing pattern
// ("^(?:…)"), nil when it has none.
func (k *kindMeta) nationalPrefix() *regexp.Regexp {
	k.once.Do(k.compile)
	return k.natPrefix
}
