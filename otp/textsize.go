package otp

import (
	"strings"
	"unicode/utf16"
)

// TextSize is how an SMS text travels: its encoding, length in that
// encoding's units and the number of segments a carrier bills.
type TextSize struct {
	Locale   string
	Encoding string // "GSM-7" or "UCS-2"
	Units    int    // septets (GSM-7, escapes count 2) or UTF-16 code units
	Segments int
}

// gsm7 is the GSM 03.38 default alphabet; gsm7ext the characters that take an
// escape (two septets).
const (
	gsm7    = "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
	gsm7ext = "^{}\\[~]|€\f"
)

// MeasureSMS says how a text is encoded and into how many segments it splits:
// 160 septets fit one GSM-7 segment (153 each when concatenated); one
// character outside the GSM alphabet makes the whole text UCS-2, 70 units in
// one segment (67 each when concatenated).
func MeasureSMS(text string) TextSize {
	septets := 0
	for _, r := range text {
		switch {
		case strings.ContainsRune(gsm7, r):
			septets++
		case strings.ContainsRune(gsm7ext, r):
			septets += 2
		default:
			units := len(utf16.Encode([]rune(text)))
			return TextSize{Encoding: "UCS-2", Units: units, Segments: segments(units, 70, 67)}
		}
	}
	return TextSize{Encoding: "GSM-7", Units: septets, Segments: segments(septets, 160, 153)}
}

func segments(n, single, multi int) int {
	if n <= single {
		return 1
	}
	return (n + multi - 1) / multi
}
