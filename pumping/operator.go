package pumping

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"smsgw/otp"
)

// operatorOf is the phone's operator as the pumping rules name it: its
// display name (control characters and invalid UTF-8 dropped, bounded)
// and the part of its Redis keys that stands for it. ok is false for a
// number libphonenumber names no operator for: it has no operator subject.
func operatorOf(p otp.Phone) (name, key string, ok bool) {
	raw := p.Operator()
	if raw == "" {
		return "", "", false
	}
	name = otp.CleanOperatorName(raw)
	if name == "" {
		return "", "", false
	}
	return name, operatorKey(name), true
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
