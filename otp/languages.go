package otp

import "strings"

// countryLanguages is the language most people of a country read, for the
// languages smsgw ships a text in (config.toml's [otp.messages]). A
// country is left out when no shipped language is read by most of it; its
// numbers get otp.message unless the request or key names a locale.
// India maps to English: Hindi is read by well under half of it, and texts
// there are written in English by custom (and in DLT-registered templates);
// "hi" is there for requests that ask for it. Kenya and Uganda likewise.
var countryLanguages = func() map[string]string {
	m := map[string]string{}
	for lang, countries := range map[string]string{
		"en": "US GB IE CA AU NZ ZA NG GH KE UG ZM ZW MW BW NA LS SZ SL LR GM JM TT BS BB BZ GY AG DM GD KN LC VC " +
			"IN PK SG MT FJ PG SB VU KI TO WS GU VI AS MP BM KY TC VG AI MS FK GI IM JE GG SS",
		"es":    "ES MX AR CO PE VE CL EC GT CU BO DO HN PY SV NI CR PA UY PR GQ",
		"pt":    "BR PT AO MZ CV GW ST",
		"fr":    "FR MC LU SN CI ML BF NE GN BJ TG CM CD CG GA CF TD DJ MG HT BI KM RE GP MQ GF YT PF NC PM WF BL MF",
		"de":    "DE AT CH LI",
		"it":    "IT SM VA",
		"nl":    "NL BE SR AW CW SX BQ",
		"pl":    "PL",
		"tr":    "TR",
		"ru":    "RU BY KZ KG",
		"uk":    "UA",
		"ar":    "SA AE EG IQ JO KW LB LY MA OM QA SY TN YE BH DZ SD PS MR",
		"bn":    "BD",
		"id":    "ID",
		"ms":    "MY BN",
		"vi":    "VN",
		"th":    "TH",
		"ja":    "JP",
		"ko":    "KR",
		"zh":    "CN",
		"zh-tw": "TW HK MO",
		"fil":   "PH",
		"sw":    "TZ",
	} {
		for _, c := range strings.Fields(countries) {
			m[c] = lang
		}
	}
	return m
}()

// CountryLanguage is the language tag smsgw texts a number of country in
// when neither the request nor its key names one ("" when none ships).
func CountryLanguage(country string) string { return countryLanguages[country] }

// localeAliases maps tags to the one a template is configured under:
// Chinese by script and region, Tagalog to Filipino, and the old codes
// Java and Android still send for Indonesian.
var localeAliases = map[string]string{
	"zh-hant": "zh-tw", "zh-hk": "zh-tw", "zh-mo": "zh-tw",
	"zh-hans": "zh", "zh-cn": "zh", "zh-sg": "zh",
	"tl": "fil", "in": "id",
}
