package pumping

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode"
	"unicode/utf8"

	"smsgw/otp"
)

// maxOperatorName bounds an operator's name as people see it (subject ids,
// metric labels); libphonenumber's longest are about 40 bytes.
const maxOperatorName = 64

// operatorOf is the phone's operator as the pumping rules name it: its
// display name (control characters and invalid UTF-8 dropped, bounded)
// and the part of its Redis keys that stands for it. ok is false for a
// number libphonenumber names no operator for: it has no operator subject.
func operatorOf(p otp.Phone) (name, key string, ok bool) {
	raw := p.Operator()
	if raw == "" {
		return "", "", false
	}
	name = operatorName(raw)
	if name == "" {
		return "", "", false
	}
	return name, operatorKey(name), true
}

// operatorName cleans a name from the prefix data for display.
func operatorName(raw string) string {
	s := strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return -1
		}
		if unicode.IsSpace(r) {
			return ' '
		}
		return r
	}, raw)
	s = strings.Join(strings.Fields(s), " ")
	for len(s) > maxOperatorName {
		_, n := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-n]
	}
	return s
}

// operatorKey names an operator in Redis keys: a readable slug of its name
// (lower-case ASCII letters and digits, at most 24) and the first 8 bytes
// of its SHA-256, so two names that slug alike ("O2", "o-2", "Ø2") stay
// two subjects, and no byte of the name (a brace that would move the key
// to another Cluster slot, a space, a colon) reaches the key.
func operatorKey(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if b.Len() == 24 {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	sum := sha256.Sum256([]byte(name))
	return b.String() + "~" + hex.EncodeToString(sum[:8])
}

// operatorID is an operator subject's id, as people see it: the country,
// a slash, the name ("NG/Glo").
func operatorID(country, name string) string { return country + "/" + name }
