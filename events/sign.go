package events

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// secretPrefix starts every Standard Webhooks secret: "whsec_<base64>".
const secretPrefix = "whsec_"

// ParseSecret reads a "whsec_<base64>" secret (standard base64 of at least
// 16 bytes, as Standard Webhooks has it) and returns the HMAC key.
func ParseSecret(s string) ([]byte, error) {
	if s == "" {
		return nil, errors.New("is not set")
	}
	b64, ok := strings.CutPrefix(s, secretPrefix)
	if !ok {
		return nil, errors.New(`must be "whsec_" and the base64 of a random key`)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, errors.New(`must be "whsec_" and the base64 of a random key (it does not decode)`)
	}
	if len(key) < 16 {
		return nil, errors.New("its key is shorter than 16 bytes")
	}
	return key, nil
}

// Sign is the Standard Webhooks signature of one delivery: "v1," and the
// base64 HMAC-SHA256 of "id.timestamp.body" under key.
func Sign(key []byte, id string, at time.Time, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(strconv.FormatInt(at.Unix(), 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}
