package api

import (
	"sync"
	"testing"

	"github.com/google/uuid"
)

// newID's ids are UUIDv7s as github.com/google/uuid reads them, and they
// only grow, from any number of goroutines.
func TestNewIDIsAnOrderedUUIDv7(t *testing.T) {
	var wg sync.WaitGroup
	ids := make([][]string, 4)
	for g := range ids {
		wg.Go(func() {
			for range 5000 {
				ids[g] = append(ids[g], newID())
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, list := range ids {
		for i, id := range list {
			u, err := uuid.Parse(id)
			if err != nil || u.Version() != 7 || u.Variant() != uuid.RFC4122 || u.String() != id {
				t.Fatalf("%q: %v, version %d, variant %v", id, err, u.Version(), u.Variant())
			}
			if i > 0 && id <= list[i-1] {
				t.Fatalf("%q after %q", id, list[i-1])
			}
			if seen[id] {
				t.Fatalf("%q twice", id)
			}
			seen[id] = true
		}
	}
	a, _ := uuid.Parse(newID())
	if now, _ := uuid.NewV7(); abs(a.Time()-now.Time()) > 1e7*5 { // 5 s, in 100 ns units
		t.Fatalf("time %v, uuid.NewV7's %v", a.Time(), now.Time())
	}
}

func abs[T ~int64](x T) T { return max(x, -x) }
