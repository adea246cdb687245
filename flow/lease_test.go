package flow

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow/flowsim"
)

// striped returns a limiter with its lease cells made at once, as if callers
// had collided on it, and the cells.
func striped(t testing.TB, limit int64, interval time.Duration, opts ...Option) (*QPS, *leases) {
	t.Helper()
	q := mustQPS(t, limit, interval, opts...)
	return q, q.stripe()
}

// allowOn decides n requests at now as a caller whose processor's cell is c.
func allowOn(q *QPS, ls *leases, c *atomic.Uint64, now, n int64) (Decision, uint64) {
	return q.decideLeasing(ls, c, now, q.grid.Index(now), n)
}

// countIn returns what bucket b's count word holds, and whether its slot
// still holds b.
func countIn(q *QPS, b uint64) (int64, bool) {
	w := q.slots[b&q.mask].Load()
	return int64(w & countMask), holds(w, b)
}

func places(c *atomic.Uint64) int64 { return int64(c.Load() & placesMask) }

func TestQPSLeasedPlacesAreTakenFromTheCellWithoutWritingTheCountWord(t *testing.T) {
	const limit = 1000
	q, ls := striped(t, limit, time.Second, WithBuckets(10), WithClock(clock.NewManual(0)))
	c := &ls.cells[0].word
	d, ob := allowOn(q, ls, c, 0, 1)
	if !d.Allowed {
		t.Fatalf("first request: %+v", d)
	}
	lease := min(maxLease, (limit-1)/ls.share)
	if got, _ := countIn(q, ob); got != 1+lease || places(c) != lease {
		t.Fatalf("count %d, cell %d; want 1 + a lease of %d counted, the lease in the cell", got, places(c), lease)
	}
	for i := range lease {
		if d, b := allowOn(q, ls, c, 0, 1); !d.Allowed || b != ob {
			t.Fatalf("leased place %d: %+v in bucket %d", i, d, b)
		}
		if got, _ := countIn(q, ob); got != 1+lease {
			t.Fatalf("leased place %d wrote the count word: %d", i, got)
		}
	}
	if places(c) != 0 {
		t.Fatalf("the cell holds %d after its lease was used", places(c))
	}
	// The next lease is smaller: the room has shrunk.
	allowOn(q, ls, c, 0, 1)
	next := min(maxLease, (limit-1-lease-1)/ls.share)
	if got, _ := countIn(q, ob); got != 2+lease+next {
		t.Fatalf("count %d after the second lease, want %d", got, 2+lease+next)
	}
}

func TestQPSLeasesNotUsedAreGivenBackWhenTheirBucketCloses(t *testing.T) {
	const limit = 1000
	c := clock.NewManual(0)
	q, ls := striped(t, limit, time.Second, WithBuckets(10), WithClock(c))
	cell := &ls.cells[0].word
	var ob uint64
	for range 5 {
		_, ob = allowOn(q, ls, cell, c.Now(), 1)
	}
	if places(cell) == 0 {
		t.Fatal("test setup: no lease in the cell")
	}
	c.Advance(100 * time.Millisecond) // the next bucket
	if d, b := allowOn(q, ls, cell, c.Now(), 1); !d.Allowed || b != ob+1 {
		t.Fatalf("the next bucket: %+v in %d", d, b)
	}
	if got, ok := countIn(q, ob); !ok || got != 5 {
		t.Fatalf("the closed bucket holds %d (its slot holds it: %v), want the 5 used", got, ok)
	}
	// With one cell, every place is used before another is leased: the
	// window allows exactly the limit.
	var more int64
	for {
		if d, _ := allowOn(q, ls, cell, c.Now(), 1); !d.Allowed {
			break
		}
		more++
	}
	if 5+1+more != limit {
		t.Fatalf("the window allowed 5, 1 and %d more, want %d in all", more, limit)
	}
}

// TestQPSPlacesLeasedToAnotherCellComeBackWhenTheBucketCloses pins the cost
// of striping the documentation states: near the limit a request is blocked
// while another cell holds places, until their bucket closes.
func TestQPSPlacesLeasedToAnotherCellComeBackWhenTheBucketCloses(t *testing.T) {
	const limit = 100
	c := clock.NewManual(0)
	q, ls := striped(t, limit, time.Second, WithBuckets(10), WithClock(c))
	a, b := &ls.cells[0].word, &ls.cells[1].word
	allowOn(q, ls, a, 0, 1)
	held := places(a)
	if held == 0 {
		t.Fatal("test setup: cell a holds no lease")
	}
	var allowedB int64
	for {
		if d, _ := allowOn(q, ls, b, 0, 1); !d.Allowed {
			if d.Reason != RateLimited {
				t.Fatalf("blocked with %v", d.Reason)
			}
			break
		}
		allowedB++
	}
	if 1+allowedB+held != limit {
		t.Fatalf("1 on a, %d on b, %d held by a: want the limit, %d, in all", allowedB, held, limit)
	}
	// The bucket closes: a's places come back to the window.
	c.Advance(100 * time.Millisecond)
	var more int64
	for {
		if d, _ := allowOn(q, ls, b, c.Now(), 1); !d.Allowed {
			break
		}
		more++
	}
	if more != held {
		t.Fatalf("%d allowed after the bucket closed, want the %d a held", more, held)
	}
	// A late caller on a does not use the places given back.
	if d, bucket := allowOn(q, ls, a, 0, 1); d.Allowed {
		t.Fatalf("a late caller on a was allowed in bucket %d from places given back", bucket)
	}
}

// TestQPSGiveBackWaitsForALeaseBeingTaken plays a caller that claimed its
// cell and counted a lease, and has not yet released the claim, when the
// next bucket opens: the give-back must wait for the lease to reach the cell,
// or the bucket would keep it counted although nobody can use it.
func TestQPSGiveBackWaitsForALeaseBeingTaken(t *testing.T) {
	c := clock.NewManual(0)
	q, ls := striped(t, 1000, time.Second, WithBuckets(10), WithClock(c))
	cell := &ls.cells[0].word
	_, ob := allowOn(q, ls, cell, 0, 1) // 1 used, a lease in the cell
	first := places(cell)
	if _, ok := q.claim(cell, ob); !ok {
		t.Fatal("claim failed")
	}
	const n, lease = 2, 7
	slot := &q.slots[ob&q.mask]
	w := slot.Load()
	if !slot.CompareAndSwap(w, w+n+lease) {
		t.Fatal("test setup: count word moved")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		q.current(ob + 1)
	}()
	// Wait until the give-back has sealed the cell, or, were it not to wait
	// for the claim, finished. (Were it not to seal the cell, it would wait
	// for ever: release after a while.)
	for give := time.Now().Add(time.Second); cell.Load()&sealedBit == 0 && time.Now().Before(give); {
		select {
		case <-done:
			give = time.Now()
		default:
			runtime.Gosched()
		}
	}
	release(cell, ob, lease)
	<-done
	if got, _ := countIn(q, ob); got != 1+n {
		t.Fatalf("the closed bucket holds %d, want the %d used (the cell held %d and %d more were being leased)", got, 1+n, first, lease)
	}
}

// TestQPSACellReadBeforeTheGiveBackCannotBeUsedAfterIt plays a request
// that read the open bucket and its cell, and stalled while the next bucket
// opened: the places it saw were given back, so its compare-and-swap on the
// cell must fail, or they would be both used and free again.
func TestQPSACellReadBeforeTheGiveBackCannotBeUsedAfterIt(t *testing.T) {
	c := clock.NewManual(0)
	q, ls := striped(t, 1000, time.Second, WithBuckets(10), WithClock(c))
	cell := &ls.cells[0].word
	_, ob := allowOn(q, ls, cell, 0, 1)
	v := cell.Load() // as the fast path reads it
	if !holds(v, ob) || v&sealedBit != 0 || v&placesMask == 0 {
		t.Fatalf("test setup: cell %#x", v)
	}
	q.current(ob + 1)
	if cell.CompareAndSwap(v, v-1) {
		t.Fatal("a place was taken from a cell after it was given back")
	}
	if got, _ := countIn(q, ob); got != 1 {
		t.Fatalf("the closed bucket holds %d, want 1", got)
	}
}

// TestQPSAStaleClaimLeavesALaterBucketsCellAlone plays a request that read
// the open bucket, stalled while later ones opened and its cell took a lease
// for one of them, and then claims the cell for the bucket it read.
func TestQPSAStaleClaimLeavesALaterBucketsCellAlone(t *testing.T) {
	c := clock.NewManual(0)
	q, ls := striped(t, 1000, time.Second, WithBuckets(10), WithClock(c))
	cell := &ls.cells[0].word
	_, stale := allowOn(q, ls, cell, 0, 1)
	c.Advance(100 * time.Millisecond)
	_, ob := allowOn(q, ls, cell, c.Now(), 1)
	before := cell.Load()
	if _, ok := q.claim(cell, stale); ok {
		t.Fatalf("a claim for closed bucket %d succeeded", stale)
	}
	if cell.Load() != before || !holds(before, ob) {
		t.Fatalf("the stale claim changed the cell of bucket %d: %#x, was %#x", ob, cell.Load(), before)
	}
}

func TestQPSStripesOnlyWhenCallersCollide(t *testing.T) {
	q := mustQPS(t, MaxLimit, time.Second)
	for range 100000 {
		q.Allow()
	}
	if q.leases.Load() != nil {
		t.Fatal("a limiter used by one goroutine made lease cells")
	}
	// Callers on every processor collide on the count word sooner or later;
	// the deadline is only a guard against a limiter that never stripes.
	procs := max(runtime.GOMAXPROCS(0), 2)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	deadline := time.Now().Add(time.Minute)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() && q.leases.Load() == nil && time.Now().Before(deadline) {
				for range 1000 {
					q.Allow()
				}
			}
		}()
	}
	wg.Wait()
	if q.leases.Load() == nil {
		t.Fatalf("%d goroutines deciding for a minute never made the limiter stripe", procs)
	}
}

func TestQPSStripedDecisionsDoNotAllocate(t *testing.T) {
	c := clock.NewManual(0)
	q := mustQPS(t, 1000, time.Second, WithClock(c))
	q.stripe()
	if n := testing.AllocsPerRun(1000, func() {
		c.Advance(time.Millisecond)
		q.Allow()
		q.AllowN(3)
		q.AllowPriority(time.Second)
	}); n != 0 {
		t.Fatalf("a striped limiter allocates %.1f times per round", n)
	}
}

// TestQPSStripedKeepsEveryPromiseOfTheModel runs the traffic patterns of the
// other property tests on striped limiters: the bound in every interval,
// with borrowing too, and the admission under steady overload.
func TestQPSStripedKeepsEveryPromiseOfTheModel(t *testing.T) {
	const limit = 100
	for _, k := range []int{1, 4, DefaultBuckets} {
		for _, p := range flowsim.Patterns() {
			q, _ := striped(t, limit, time.Second, WithBuckets(k))
			r := flowsim.Run(func(now, n int64) bool { return q.AllowNAt(now, n).Allowed }, p, limit, time.Second, 40*time.Second, 0, 1)
			if r.MaxInInterval > limit {
				t.Errorf("%d buckets, %s: %d allowed in one interval", k, p.Name, r.MaxInInterval)
			}
			if p.Name == "steady 2x" && r.PerInterval < 95*float64(k)/float64(k+1) {
				t.Errorf("%d buckets, %s: %.2f allowed per interval", k, p.Name, r.PerInterval)
			}

			q, _ = striped(t, limit, time.Second, WithBuckets(k))
			rng := rand.New(rand.NewPCG(9, uint64(k)))
			var allowed []flowsim.Arrival
			for _, a := range p.Arrivals(rng, limit, time.Second, 30*time.Second) {
				var d Decision
				if rng.IntN(3) == 0 {
					d = q.AllowPriorityNAt(a.At, a.N, 500*time.Millisecond)
				} else {
					d = q.AllowNAt(a.At, a.N)
				}
				if d.Allowed {
					allowed = append(allowed, flowsim.Arrival{At: a.At + int64(d.Wait), N: a.N})
				}
			}
			slices.SortFunc(allowed, func(x, y flowsim.Arrival) int { return int(x.At - y.At) })
			if got := flowsim.MaxInAnyInterval(allowed, time.Second); got > limit {
				t.Errorf("%d buckets, %s: %d allowed in one interval with borrowing", k, p.Name, got)
			}
		}
	}
}

// TestQPSSetLimitWithLeasesOutstanding: places leased before a lower limit
// may be used until their bucket closes, as SetLimit says, and no further.
func TestQPSSetLimitWithLeasesOutstanding(t *testing.T) {
	c := clock.NewManual(0)
	q, ls := striped(t, 1000, time.Second, WithBuckets(10), WithClock(c))
	a, b := &ls.cells[0].word, &ls.cells[1].word
	allowOn(q, ls, a, 0, 1)
	held := places(a)
	if err := q.SetLimit(10); err != nil {
		t.Fatal(err)
	}
	if d, _ := allowOn(q, ls, b, 0, 1); d.Allowed {
		t.Fatal("another cell was allowed over the new limit")
	}
	for i := range held {
		if d, _ := allowOn(q, ls, a, 0, 1); !d.Allowed {
			t.Fatalf("leased place %d of %d refused in its bucket", i, held)
		}
	}
	// Once the bucket has left the window, the new limit holds.
	c.Set(int64(1100 * time.Millisecond))
	n := 0
	for n < 100 {
		if d, _ := allowOn(q, ls, b, c.Now(), 1); !d.Allowed {
			break
		}
		n++
	}
	if n != 10 {
		t.Fatalf("a fresh window allowed %d, want the new limit, 10", n)
	}
}

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
		opts := []Option{WithBuckets(k), WithClock(c)}
		if warm {
			opts = append(opts, WithWarmUp(5*k*time.Duration(width), 3))
		}
		q, ls := striped(t, limit, time.Duration(k*width), opts...)
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
