package otp

import (
	"bytes"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"strconv"
	"sync"
	"testing"
)

// TestMACIsAFreshHMACs: MAC, which reuses its HMACs, answers as one made
// for each call, from goroutines at once, one after another.
func TestMACIsAFreshHMACs(t *testing.T) {
	secret := "0123456789abcdef0123456789abcdef-mac"
	s, err := NewSecrets(secret)
	if err != nil {
		t.Fatal(err)
	}
	key, err := hkdf.Key(sha256.New, []byte(secret), nil, "smsgw otp mac v1", 32)
	if err != nil {
		t.Fatal(err)
	}
	fresh := func(phone, code string) []byte {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(phone + "\x00" + code))
		return m.Sum(nil)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Go(func() {
			for i := 0; i < 500; i++ {
				phone, code := "+1415555"+strconv.Itoa(1000+g*500+i), strconv.Itoa(100000+i*7)
				if got, want := s.MAC(phone, code), fresh(phone, code); !bytes.Equal(got, want) {
					t.Errorf("MAC(%s, %s) = %x, a fresh HMAC %x", phone, code, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

func BenchmarkMAC(b *testing.B) {
	s, err := NewSecrets("0123456789abcdef0123456789abcdef-mac")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		s.MAC("+14155552671", "123456")
	}
}
