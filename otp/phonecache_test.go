package otp

import "testing"

// The flow parses a number once and finds the answer in the cache after:
// valid answers and refusals alike, the region in any case.
func TestPhoneAnswersRemembered(t *testing.T) {
	s := &Service{cfg: Config{DefaultRegion: "US"}, phones: newPhoneCache(8)}
	for _, region := range []string{"", "us", "US"} {
		p, err := s.parsePhone("(415) 555-2671", region)
		if err != nil || p.E164 != "+14155552671" {
			t.Fatalf("parse in %q: %v, %v", region, p.E164, err)
		}
		if _, err := s.parsePhone("+1 not a number", region); err == nil {
			t.Fatalf("parse of a non-number in %q: no error", region)
		}
	}
	if n := s.phones.m.Len(); n != 2 {
		t.Fatalf("%d answers cached, want 2: one parse for each number", n)
	}
	if p, ok := s.phones.get("(415) 555-2671", "US"); !ok || p.phone.E164 != "+14155552671" {
		t.Fatalf("cached answer %+v, %v", p, ok)
	}
	if p, ok := s.phones.get("+1 not a number", "US"); !ok || p.err == nil {
		t.Fatalf("cached refusal %+v, %v", p, ok)
	}
}

// The cache holds at most its bound: attackers choose the numbers.
func TestPhoneCacheBounded(t *testing.T) {
	c := newPhoneCache(0)
	c.put("+14155552671", "", parsedPhone{})
	c.put("+14155552672", "", parsedPhone{})
	if _, ok := c.get("+14155552671", ""); ok || c.m.Len() != 1 {
		t.Fatalf("a cache of one holds %d, the oldest kept: %v", c.m.Len(), ok)
	}
}
