package otp

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
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

// TestSealIsTheAEADs: Seal's output is its nonce and the AEAD's sealing of
// the code under it with the phone as authenticated data, as the AEAD
// seals it by itself, opens with Open, and holds nothing past its length.
func TestSealIsTheAEADs(t *testing.T) {
	secret := "0123456789abcdef0123456789abcdef-seal"
	s, err := NewSecrets(secret)
	if err != nil {
		t.Fatal(err)
	}
	key, err := hkdf.Key(sha256.New, []byte(secret), nil, "smsgw otp seal v1", 32)
	if err != nil {
		t.Fatal(err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		phone, code := "+1415555"+strconv.Itoa(1000+i), strconv.Itoa(100000000 + i*7)[:4+i%5]
		sealed, err := s.Seal(phone, code)
		if err != nil {
			t.Fatal(err)
		}
		n := aead.NonceSize()
		want := aead.Seal(nil, sealed[:n], []byte(code), []byte(phone))
		if !bytes.Equal(sealed[n:], want) || cap(sealed) != len(sealed) {
			t.Fatalf("Seal(%s, %s) = %x (cap %d), the AEAD's %x", phone, code, sealed, cap(sealed), want)
		}
		if got, err := s.Open(phone, sealed); err != nil || got != code {
			t.Fatalf("Open(Seal(%s, %s)) = %q, %v", phone, code, got, err)
		}
	}
}

func BenchmarkSeal(b *testing.B) {
	s, err := NewSecrets("0123456789abcdef0123456789abcdef-seal")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		s.Seal("+14155552671", "123456")
	}
}
