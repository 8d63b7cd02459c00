package pumping

import (
	"testing"
	"time"

	"smsgw/otp"
)

// TestHoldCacheLapses: a hold answers until the earlier of its hold time and
// the rule's own retry, with RetryAfter counted from the asking moment, and
// is forgotten after.
func TestHoldCacheLapses(t *testing.T) {
	c := newHoldCache(10)
	now := time.Unix(1_800_000_000, 0)
	if !c.empty() {
		t.Fatal("a new cache is not empty")
	}
	c.put("range\x00a", otp.PumpingRefusal{Rule: "range_100", RetryAfter: time.Hour}, now, time.Minute)
	c.put("range\x00b", otp.PumpingRefusal{Rule: "range_100", RetryAfter: 20 * time.Second}, now, time.Minute)
	c.put("range\x00c", otp.PumpingRefusal{Rule: "range_100", RetryAfter: time.Hour}, now, 0) // no hold: not kept
	if r, ok := c.get("range\x00a", now.Add(30*time.Second)); !ok || r.RetryAfter != time.Hour-30*time.Second {
		t.Fatalf("a at 30 s: %v %v", r, ok)
	}
	if _, ok := c.get("range\x00b", now.Add(20*time.Second)); ok {
		t.Fatal("b answers past its rule's own retry")
	}
	if _, ok := c.get("range\x00c", now); ok {
		t.Fatal("a hold of 0 was kept")
	}
	if _, ok := c.get("range\x00a", now.Add(time.Minute)); ok {
		t.Fatal("a answers past its hold")
	}
	if !c.empty() {
		t.Fatal("lapsed holds are still held")
	}
}

// TestHoldCacheBounded: attackers choose the subjects, so the cache keeps at
// most its size, forgetting the hold asked least recently; drop and clear
// forget at once.
func TestHoldCacheBounded(t *testing.T) {
	c := newHoldCache(2)
	now := time.Unix(1_800_000_000, 0)
	held := otp.PumpingRefusal{Rule: "network", RetryAfter: time.Hour}
	c.put("a", held, now, time.Minute)
	c.put("b", held, now, time.Minute)
	c.get("a", now) // a was asked last
	c.put("c", held, now, time.Minute)
	if _, ok := c.get("b", now); ok {
		t.Fatal("the least recently asked hold was kept past the bound")
	}
	for _, k := range []string{"a", "c"} {
		if _, ok := c.get(k, now); !ok {
			t.Fatalf("%s forgotten", k)
		}
	}
	c.drop("a")
	if _, ok := c.get("a", now); ok {
		t.Fatal("a dropped hold answers")
	}
	c.clear()
	if !c.empty() {
		t.Fatal("clear left holds")
	}
}
