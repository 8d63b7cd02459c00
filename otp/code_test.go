package otp

import (
	"math"
	"testing"
)

func TestNewCode(t *testing.T) {
	for _, length := range []int{4, 6, 8, 10} {
		seen := map[string]bool{}
		leadingZero := false
		for i := 0; i < 2000; i++ {
			c, err := NewCode(length)
			if err != nil {
				t.Fatal(err)
			}
			if len(c) != length {
				t.Fatalf("code %q has length %d, want %d", c, len(c), length)
			}
			for _, r := range c {
				if r < '0' || r > '9' {
					t.Fatalf("code %q is not all digits", c)
				}
			}
			leadingZero = leadingZero || c[0] == '0'
			seen[c] = true
		}
		// Expected distinct values of 2000 uniform draws from 10^length.
		space := math.Pow(10, float64(length))
		expect := space * (1 - math.Exp(-2000/space))
		if float64(len(seen)) < 0.97*expect {
			t.Errorf("length %d: %d distinct codes of 2000, expected about %.0f", length, len(seen), expect)
		}
		if !leadingZero {
			t.Errorf("length %d: no code of 2000 starts with 0; codes are not uniform", length)
		}
	}
}
