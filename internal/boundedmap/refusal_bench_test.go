package boundedmap_test

import (
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/maypok86/otter/v2"

	"smsgw/internal/boundedmap"
	"smsgw/internal/testenv"
)

// refusal is the refusal cache's entry (ratelimit/refusals.go): a moment
// and a window.
type refusal struct {
	until  time.Time
	window [2]int64
}

// cache is what the refusal cache asks of its map.
type cache interface {
	get(key string) (refusal, bool)
	put(key string, v refusal)
	drop(key string)
}

type bounded struct{ m *boundedmap.Map[refusal] }

func (c bounded) get(k string) (refusal, bool) { return c.m.Get(k, nil) }
func (c bounded) put(k string, v refusal)      { c.m.Put(k, v, nil) }
func (c bounded) drop(k string)                { c.m.Drop(k) }

type hashiLRU struct{ m *lru.Cache[string, refusal] }

func (c hashiLRU) get(k string) (refusal, bool) { return c.m.Get(k) }
func (c hashiLRU) put(k string, v refusal)      { c.m.Add(k, v) }
func (c hashiLRU) drop(k string)                { c.m.Remove(k) }

// hashiPeek looks up without moving the entry (Peek, under a read lock):
// eviction stays in the order entries were put, as boundedmap's DropOldest.
type hashiPeek struct{ m *lru.Cache[string, refusal] }

func (c hashiPeek) get(k string) (refusal, bool) { return c.m.Peek(k) }
func (c hashiPeek) put(k string, v refusal)      { c.m.Add(k, v) }
func (c hashiPeek) drop(k string)                { c.m.Remove(k) }

type hashiExpirable struct {
	m *expirable.LRU[string, refusal]
}

func (c hashiExpirable) get(k string) (refusal, bool) { return c.m.Get(k) }
func (c hashiExpirable) put(k string, v refusal)      { c.m.Add(k, v) }
func (c hashiExpirable) drop(k string)                { c.m.Remove(k) }

type otterCache struct{ m *otter.Cache[string, refusal] }

func (c otterCache) get(k string) (refusal, bool) { return c.m.GetIfPresent(k) }
func (c otterCache) put(k string, v refusal)      { c.m.Set(k, v) }
func (c otterCache) drop(k string)                { c.m.Invalidate(k) }

// refusalEntries is limits.local_refusal_cache's default.
const refusalEntries = 100_000

type candidate struct {
	name string
	make func(b *testing.B) cache
}

var candidates = []candidate{
	{"boundedmap", func(*testing.B) cache {
		return bounded{boundedmap.New[refusal](refusalEntries, boundedmap.DropOldest)}
	}},
	{"golang-lru", func(b *testing.B) cache {
		m, err := lru.New[string, refusal](refusalEntries)
		if err != nil {
			b.Fatal(err)
		}
		return hashiLRU{m}
	}},
	{"golang-lru-peek", func(b *testing.B) cache {
		m, err := lru.New[string, refusal](refusalEntries)
		if err != nil {
			b.Fatal(err)
		}
		return hashiPeek{m}
	}},
	{"golang-lru-expirable", func(b *testing.B) cache {
		// The refusal cache checks each entry's own moment; the TTL only
		// bounds how long a dead entry stays (a day: longer than a window).
		m := expirable.NewLRU[string, refusal](refusalEntries, nil, 24*time.Hour)
		return hashiExpirable{m}
	}},
	{"otter", func(b *testing.B) cache {
		m, err := otter.New(&otter.Options[string, refusal]{MaximumSize: refusalEntries})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { m.StopAllGoroutines() })
		return otterCache{m}
	}},
}

// keys are subjects as the limiter names them, made before the clock runs.
func keys(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(1_000_000_000+i)
	}
	return out
}

// BenchmarkRefusalCache compares boundedmap with the libraries on the
// refusal cache's path, each filled to limits.local_refusal_cache:
//
//   - flood: a flood on one hot phone and address, each request looking up
//     both subjects and finding the refusal (the refused path);
//   - fresh: each request looking up two subjects nobody refused (every
//     accepted send's path);
//   - remember: each request a new subject refused, a full cache evicting
//     one (an attack choosing its subjects).
//
// Rounds interleave the candidates (each round starting with the next
// one), 8 goroutines doing refusalOps requests between them; it reports,
// per shape and candidate, the median ns a request and the median over
// the rounds of the candidate's time over boundedmap's in the same round
// (x-boundedmap: above 1 is slower). SMSGW_BENCH_ROUNDS, default 7.
//
//	go test -run '^$' -bench RefusalCache -benchtime 1x -v ./internal/boundedmap
func BenchmarkRefusalCache(b *testing.B) {
	rounds := 7
	if n, err := strconv.Atoi(os.Getenv("SMSGW_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	filled := keys("rl:{send:phone:+1}", refusalEntries)
	fresh := keys("rl:{send:ip:10.}", 1<<20)
	until := refusal{until: time.Now().Add(time.Hour)}
	hotPhone, hotIP := filled[len(filled)-1], filled[len(filled)-2]
	for _, shape := range []string{"flood", "fresh", "remember"} {
		caches := make([]cache, len(candidates))
		for i, c := range candidates {
			caches[i] = c.make(b)
			for _, k := range filled {
				caches[i].put(k, until)
			}
		}
		perOp := make([][]float64, len(candidates))
		ratio := make([][]float64, len(candidates))
		var next atomic.Int64
		for r := range rounds {
			took := make([]time.Duration, len(candidates))
			for j := range candidates {
				i := (r + j) % len(candidates)
				m := caches[i]
				var hits atomic.Int64
				var wg sync.WaitGroup
				start := time.Now()
				for range refusalWorkers {
					wg.Go(func() {
						var h int64
						for range refusalOps / refusalWorkers {
							switch shape {
							case "flood":
								if _, ok := m.get(hotPhone); ok {
									h++
								}
								if _, ok := m.get(hotIP); ok {
									h++
								}
							case "fresh":
								n := next.Add(2)
								if _, ok := m.get(fresh[n&(1<<20-1)]); ok {
									h++
								}
								if _, ok := m.get(fresh[(n+1)&(1<<20-1)]); ok {
									h++
								}
							case "remember":
								m.put(fresh[next.Add(1)&(1<<20-1)], until)
							}
						}
						hits.Add(h)
					})
				}
				wg.Wait()
				took[i] = time.Since(start)
				if shape == "flood" && hits.Load() != 2*refusalOps/refusalWorkers*refusalWorkers {
					b.Errorf("%s: the hot subjects were found %d times of %d", candidates[i].name, hits.Load(), 2*refusalOps)
				}
			}
			for i := range candidates {
				perOp[i] = append(perOp[i], float64(took[i].Nanoseconds())/refusalOps)
				ratio[i] = append(ratio[i], float64(took[i])/float64(took[0]))
			}
		}
		for i, c := range candidates {
			b.Logf("%-8s %-22s %8.0f ns/request  x-boundedmap %.2f  (rounds %.2f)", shape, c.name,
				testenv.Median(perOp[i]), testenv.Median(ratio[i]), ratio[i])
		}
	}
}

// refusalOps is the requests of one candidate's turn in a round, shared by
// refusalWorkers goroutines (more than the cores, as a server's are).
const (
	refusalOps     = 400_000
	refusalWorkers = 8
)
