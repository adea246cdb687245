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
	"github.com/slidegate/slidegate/internal/flowlimits"
	"github.com/slidegate/slidegate/internal/flowsim"
)

// striped returns a limiter with its lease cells made at once, as if callers
// had collided on it, and the cells.
func striped(t testing.TB, s QPSSettings) (*QPS, *leases) {
	t.Helper()
	q := mustQPS(t, s)
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
	q, ls := striped(t, QPSSettings{Limit: limit, Interval: time.Second, Buckets: 10, Clock: clock.NewManual(0)})
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
	q, ls := striped(t, QPSSettings{Limit: limit, Interval: time.Second, Buckets: 10, Clock: c})
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
	q, ls := striped(t, QPSSettings{Limit: limit, Interval: time.Second, Buckets: 10, Clock: c})
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
	q, ls := striped(t, QPSSettings{Limit: 1000, Interval: time.Second, Buckets: 10, Clock: c})
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
	q, ls := striped(t, QPSSettings{Limit: 1000, Interval: time.Second, Buckets: 10, Clock: c})
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
	q, ls := striped(t, QPSSettings{Limit: 1000, Interval: time.Second, Buckets: 10, Clock: c})
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
	q := mustQPS(t, QPSSettings{Limit: maxLimit, Interval: time.Second})
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
	q := mustQPS(t, QPSSettings{Limit: 1000, Interval: time.Second, Clock: c})
	q.stripe()
	if n := testing.AllocsPerRun(1000, func() {
		c.Advance(time.Millisecond)
		q.Allow()
		q.AllowN(3)
		q.AllowPriorityN(1, time.Second)
	}); n != 0 {
		t.Fatalf("a striped limiter allocates %.1f times per round", n)
	}
}

// TestQPSStripedKeepsEveryPromiseOfTheModel runs the traffic patterns of the
// other property tests on striped limiters: the bound in every interval,
// with borrowing too, and the admission under steady overload.
func TestQPSStripedKeepsEveryPromiseOfTheModel(t *testing.T) {
	const limit = 100
	for _, k := range []int{1, 4, flowlimits.DefaultBuckets} {
		for _, p := range flowsim.Patterns() {
			q, _ := striped(t, QPSSettings{Limit: limit, Interval: time.Second, Buckets: k})
			r := flowsim.Run(func(now, n int64) bool { return q.AllowNAt(now, n).Allowed }, p, limit, time.Second, 40*time.Second, 0, 1)
			if r.MaxInInterval > limit {
				t.Errorf("%d buckets, %s: %d allowed in one interval", k, p.Name, r.MaxInInterval)
			}
			if p.Name == "steady 2x" && r.PerInterval < 95*float64(k)/float64(k+1) {
				t.Errorf("%d buckets, %s: %.2f allowed per interval", k, p.Name, r.PerInterval)
			}

			q, _ = striped(t, QPSSettings{Limit: limit, Interval: time.Second, Buckets: k})
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
	q, ls := striped(t, QPSSettings{Limit: 1000, Interval: time.Second, Buckets: 10, Clock: c})
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
