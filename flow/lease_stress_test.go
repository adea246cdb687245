package flow

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// TestQPSStripedUnderStressKeepsTheBoundAndLosesNoCount hammers striped
// limiters from many goroutines on more processors than cores, on a manual
// clock a driver moves, with late callers and prioritized requests, and
// records the bucket every allowed request was counted in. Phase by phase,
// once the callers are quiet and the last bucket's leases given back, every
// bucket's count word must hold exactly what was recorded in it; and no k+1
// buckets may hold more than the limit.
func TestQPSStripedUnderStressKeepsTheBoundAndLosesNoCount(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 8)))
	const (
		k       = 20
		width   = int64(time.Millisecond)
		limit   = 3000
		workers = 16
		phases  = 25
	)
	for _, warm := range []bool{false, true} {
		c := clock.NewManual(0)
		s := QPSSettings{Limit: limit, Interval: time.Duration(k * width), Buckets: k, Clock: c}
		if warm {
			s.WarmUp, s.ColdFactor = 5*k*time.Duration(width), 3
		}
		q, ls := striped(t, s)
		if len(q.slots) < k+12 {
			t.Fatalf("test setup: %d slots", len(q.slots))
		}
		counted := map[uint64]int64{}
		var total, leased int64
		driver := rand.New(rand.NewPCG(3, 4))
		for phase := range phases {
			first := q.current(q.grid.Index(c.Now()))
			var stop atomic.Bool
			results := make([]map[uint64]int64, workers)
			var wg sync.WaitGroup
			for g := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(phase), uint64(g)))
					mine := map[uint64]int64{}
					for !stop.Load() {
						now := c.Now()
						if r.IntN(8) == 0 {
							now -= r.Int64N(3 * width) // a late caller
						}
						n := 1 + r.Int64N(4)
						var d Decision
						var b uint64
						if r.IntN(10) == 0 {
							d, b = q.decidePriority(now, n, time.Duration(2*width))
						} else {
							d, b = q.decide(now, n)
						}
						if d.Allowed {
							mine[b] += n
						}
						if r.IntN(3) == 0 {
							runtime.Gosched()
						}
					}
					results[g] = mine
				}()
			}
			// At most 10 buckets a phase, so that every bucket of the phase
			// is still in its slot at the end.
			for range 200 {
				c.Advance(time.Duration(driver.Int64N(width / 20)))
				runtime.Gosched()
				for i := range ls.cells {
					if v := ls.cells[i].word.Load(); v&sealedBit == 0 {
						leased += int64(v & placesMask)
					}
				}
			}
			stop.Store(true)
			wg.Wait()
			last := q.current(q.grid.Index(c.Now()))
			// Open last+2: last's leases come back, and last+1 holds what
			// last lent it.
			q.current(last + 2)
			phaseCounted := map[uint64]int64{}
			for _, m := range results {
				for b, n := range m {
					if b < first || b > last+1 {
						t.Fatalf("warm-up %v, phase %d: %d counted in bucket %d, outside [%d, %d]", warm, phase, n, b, first, last+1)
					}
					phaseCounted[b] += n
				}
			}
			for b := first; b <= last+1; b++ {
				got, ok := countIn(q, b)
				if !ok {
					t.Fatalf("warm-up %v, phase %d: bucket %d has left its slot", warm, phase, b)
				}
				if got != phaseCounted[b] {
					t.Fatalf("warm-up %v, phase %d: bucket %d holds %d, but %d were allowed in it", warm, phase, b, got, phaseCounted[b])
				}
				counted[b] = phaseCounted[b]
				total += phaseCounted[b]
			}
			// Idle for up to two intervals before the next phase.
			c.Advance(time.Duration(driver.Int64N(2 * k * width)))
		}
		for b := range counted {
			var window int64
			for j := b - k; j <= b; j++ {
				window += counted[j]
			}
			if window > limit {
				t.Fatalf("warm-up %v: buckets %d to %d hold %d, above the limit %d", warm, b-k, b, window, limit)
			}
		}
		if total == 0 || leased == 0 {
			t.Fatalf("warm-up %v: %d allowed, and the cells never held a place when the driver looked: the test exercised nothing", warm, total)
		}
		t.Logf("warm-up %v: %d allowed over %d buckets; the cells held %d places in all when the driver looked", warm, total, len(counted), leased)
	}
}
