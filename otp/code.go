package otp

import (
	"crypto/rand"
	"math/big"
)

// NewCode returns length decimal digits from crypto/rand, uniformly: every
// code is equally likely, leading zeros included.
func NewCode(length int) (string, error) {
	limit := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(length)), nil)
	n, err := rand.Int(rand.Reader, limit)
	if err != nil {
		return "", err
	}
	digits := n.String()
	buf := make([]byte, length)
	pad := length - len(digits)
	for i := 0; i < pad; i++ {
		buf[i] = '0'
	}
	copy(buf[pad:], digits)
	return string(buf), nil
}
