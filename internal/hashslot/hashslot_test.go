package hashslot

import (
	"slices"
	"testing"
)

// Slots as CLUSTER KEYSLOT answers them (ratelimit's and admission's
// Cluster tests also compare with a live Cluster).
func TestOf(t *testing.T) {
	for key, want := range map[string]uint16{
		"123456789":            12739, // the CRC16 check value 0x31C3, modulo 16384
		"{user1000}.following": OfTag("user1000"),
		"foo{}{bar}":           OfTag("foo{}{bar}"), // an empty first tag: the whole key
		"foo{{bar}}zap":        OfTag("{bar"),
	} {
		if got := Of(key); got != want {
			t.Errorf("Of(%q) = %d, want %d", key, got, want)
		}
	}
	if Of("p:rl:{send:phone:+14155550100}") != OfTag("send:phone:+14155550100") {
		t.Error("a key's slot is not its tag's")
	}
}

func TestGroups(t *testing.T) {
	var g Groups[string]
	for _, s := range []string{"a1", "b1", "a2", "c1", "b2"} {
		g.Add(uint16(s[0]), s)
	}
	want := [][]string{{"a1", "a2"}, {"b1", "b2"}, {"c1"}}
	if got := g.List(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("groups %v, want %v", got, want)
	}
	var empty Groups[int]
	if empty.List() != nil {
		t.Fatal("an empty Groups lists something")
	}
}
