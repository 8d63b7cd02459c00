package otp

import (
	"regexp"
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
