package region

import "testing"

// OfNumber answers by calling code where every country of the code has one
// home, and parses the number where they differ.
func TestHomesOfNumber(t *testing.T) {
	h := NewHomes(1, "us", map[string]string{"GB": "eu", "GG": "eu", "JE": "eu", "IM": "eu", "DE": "eu", "CA": "ca"}, nil)
	for _, tc := range []struct{ number, want string }{
		{"+447400123456", "eu"},  // GB
		{"+447911123456", "eu"},  // Guernsey, same home as GB
		{"+4915112345678", "eu"}, // DE
		{"+33612345678", "us"},   // FR: the default
		{"+14155552671", "us"},   // US: +1 is shared with Canada, parsed
		{"+16135550123", "ca"},   // CA
		{"+80012345678", "us"},   // an international network, not listed
		{"not a number", "us"},
	} {
		t.Run(tc.number, func(t *testing.T) {
			if got := h.OfNumber(tc.number); got != tc.want {
				t.Fatalf("OfNumber(%s) = %q, want %q", tc.number, got, tc.want)
			}
		})
	}
	// A shared code with one home is answered without parsing: Guernsey
	// apart from GB must be parsed, and is.
	split := NewHomes(1, "us", map[string]string{"GB": "eu"}, nil)
	if got := split.OfNumber("+447911123456"); got != "us" {
		t.Fatalf("Guernsey, not listed: %q, want the default", got)
	}
	if got := split.OfNumber("+447400123456"); got != "eu" {
		t.Fatalf("GB: %q, want eu", got)
	}
}
