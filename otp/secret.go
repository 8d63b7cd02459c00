package otp

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"sync"
)

// MinSecretLength is the shortest SMSGW_SECRET accepted: 32 characters carry
// enough entropy for the keys derived from it when they are random.
const MinSecretLength = 32

// Secrets holds the keys derived from SMSGW_SECRET. Codes are stored only as
// an HMAC (to compare a guess) and sealed with AES-256-GCM (to text the same
// code again on a resend); neither reveals a code without the secret.
type Secrets struct {
	macKey []byte
	aead   cipher.AEAD
	// subjectKey names a caller's limit-key values in Redis keys.
	subjectKey []byte
	// macs are HMACs keyed with macKey, reset between uses: a new one
	// derives its inner and outer keyed states again.
	macs *sync.Pool
}

// NewSecrets derives the code keys from secret with HKDF-SHA256, one key per
// purpose, so the MAC key never doubles as the encryption key.
func NewSecrets(secret string) (*Secrets, error) {
	if len(secret) < MinSecretLength {
		return nil, fmt.Errorf("must be at least %d characters (got %d)", MinSecretLength, len(secret))
	}
	macKey, err := hkdf.Key(sha256.New, []byte(secret), nil, "smsgw otp mac v1", 32)
	if err != nil {
		return nil, err
	}
	encKey, err := hkdf.Key(sha256.New, []byte(secret), nil, "smsgw otp seal v1", 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(encKey)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	subjectKey, err := hkdf.Key(sha256.New, []byte(secret), nil, "smsgw subject v1", 32)
	if err != nil {
		return nil, err
	}
	return &Secrets{macKey: macKey, aead: aead, subjectKey: subjectKey,
		macs: &sync.Pool{New: func() any { return hmac.New(sha256.New, macKey) }}}, nil
}

// RandomSecret returns a fresh secret, for dev mode only: codes do not
// survive a restart with it.
func RandomSecret() string {
	return rand.Text() + rand.Text()
}

// MAC binds a code to its phone: the same code for two phones gives two
// unrelated MACs, and a MAC for one phone never matches a guess for another.
func (s *Secrets) MAC(phone, code string) []byte {
	// The sum and, past it, the MAC's input, in one allocation (a []byte
	// handed to a hash.Hash escapes: each conversion was one); the input is
	// cleared before the sum is written.
	buf := make([]byte, 0, sha256.Size+len(phone)+1+len(code))
	in := append(append(append(buf[sha256.Size:sha256.Size], phone...), 0), code...)
	m := s.macs.Get().(hash.Hash)
	m.Reset()
	m.Write(in)
	clear(in)
	sum := m.Sum(buf)
	s.macs.Put(m)
	return sum[:sha256.Size:sha256.Size]
}

// SubjectMAC names a caller's limit-key value (an account, a session) in
// Redis keys without the value in clear: hex of 128 bits of HMAC-SHA256
// under a key of its own, bound to the key's name.
func (s *Secrets) SubjectMAC(name, value string) string {
	m := hmac.New(sha256.New, s.subjectKey)
	m.Write([]byte(name))
	m.Write([]byte{0})
	m.Write([]byte(value))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// Seal encrypts code for phone; the phone is authenticated data, so a sealed
// code moved to another phone's key does not open.
func (s *Secrets) Seal(phone, code string) ([]byte, error) {
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(code)+s.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return s.aead.Seal(nonce, nonce, []byte(code), []byte(phone)), nil
}

// ErrSealBroken means a sealed code does not open: it was sealed under another
// secret (SMSGW_SECRET was rotated) or for another phone.
var ErrSealBroken = errors.New("sealed code does not open with this secret")

// Open decrypts what Seal produced for the same phone.
func (s *Secrets) Open(phone string, sealed []byte) (string, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return "", ErrSealBroken
	}
	code, err := s.aead.Open(nil, sealed[:n], sealed[n:], []byte(phone))
	if err != nil {
		return "", ErrSealBroken
	}
	return string(code), nil
}
