package otp

import (
	"strconv"
	"testing"
)

func BenchmarkParsePhone(b *testing.B) {
	for _, tt := range []struct{ name, raw, region string }{
		{"US E.164", "+16502530000", ""},
		{"US national", "(650) 253-0000", "US"},
		{"GB", "+447400123456", ""},
		{"DE", "+4915123456789", ""},
	} {
		b.Run(tt.name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				raw := tt.raw
				if i%2 == 1 { // defeat any caching of one string
					raw = raw[:len(raw)-1] + strconv.Itoa(i%10)
				}
				if _, err := ParsePhone(raw, tt.region); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
