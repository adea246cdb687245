package flow

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/slidegate/slidegate/internal/stripe"
)

// TestPlacePoolDecidesAsAnExactCountWithOneCallerAtATime runs random
// acquisitions, releases and new limits on a pool whose cells are made,
// each from a random processor's cell, against a plain count: with one
// caller at a time every decision is the exact one, and the places held
// are the count.
func TestPlacePoolDecidesAsAnExactCountWithOneCallerAtATime(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 29))
		limit := int64(rng.IntN(40))
		p := newPlacePool(limit)
		if seed%4 != 0 {
			p.grow() // as the first contention would; one seed in four without cells
		}
		cells := 2 * stripe.Count() // hints past the cells wrap, as processors past them do
		var held []int64            // the places of each request in flight
		sum := int64(0)
		for op := range 3000 {
			hint := rng.IntN(cells)
			switch r := rng.IntN(20); {
			case r < 9:
				n := int64(1 + rng.IntN(3))
				want := sum+n <= limit
				if got := p.acquireOn(hint, n); got != want {
					t.Fatalf("seed %d op %d: acquire %d with %d held of %d: %v, want %v", seed, op, n, sum, limit, got, want)
				}
				if want {
					held = append(held, n)
					sum += n
				}
			case r < 18 && len(held) > 0:
				i := rng.IntN(len(held))
				p.releaseOn(hint, held[i])
				sum -= held[i]
				held[i] = held[len(held)-1]
				held = held[:len(held)-1]
			case r >= 18:
				limit = int64(rng.IntN(40))
				p.set(limit)
			}
			if got := p.held(); got != sum {
				t.Fatalf("seed %d op %d: held %d, want %d", seed, op, got, sum)
			}
			if p.taken() > max(limit, sum) || p.taken() > limit && p.taken() != sum {
				t.Fatalf("seed %d op %d: %d places out of the pool, %d held, limit %d", seed, op, p.taken(), sum, limit)
			}
		}
	}
}

// TestAConcurrencyLimitNeverAdmitsMoreThanItsLimitWhileItChanges runs
// requests from many goroutines on every processor, each holding its
// places a little, while the limit moves up and down. No admission that
// started after a Set returned may make the requests inside more than the
// largest limit set since: the free places the processors keep are never
// above the limit.
func TestAConcurrencyLimitNeverAdmitsMoreThanItsLimitWhileItChanges(t *testing.T) {
	limits := []int64{8, 3, 40, 1, 0, 17, 2, 64, 5, 30, 4}
	c, err := NewConcurrency(ConcurrencySettings{Limit: limits[0]})
	if err != nil {
		t.Fatal(err)
	}
	c.places.grow() // as contention on enough processors would
	var phase atomic.Int64
	var inside, allowed, worst atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := range 4 * runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for !stop.Load() {
				from := phase.Load()
				n := int64(1 + rng.IntN(2))
				var p Permit
				if !c.AcquireN(&p, "", n).Allowed {
					runtime.Gosched()
					continue
				}
				allowed.Add(1)
				now := inside.Add(n)
				// The largest limit in force since the acquisition began:
				// the one a Set in progress is putting in force too.
				bound := int64(0)
				for ph := from; ph <= min(phase.Load()+1, int64(len(limits)-1)); ph++ {
					bound = max(bound, limits[ph])
				}
				if now > bound {
					worst.Store(max(worst.Load(), now-bound))
				}
				for range rng.IntN(3) {
					runtime.Gosched()
				}
				inside.Add(-n)
				p.Done(Succeeded)
			}
		}()
	}
	for ph := 1; ph < len(limits); ph++ {
		for start := allowed.Load(); allowed.Load() < start+2000 && limits[ph-1] > 0; {
			runtime.Gosched()
		}
		if err := c.Set(limits[ph], nil); err != nil {
			t.Fatal(err)
		}
		phase.Store(int64(ph))
	}
	for start := allowed.Load(); allowed.Load() < start+2000; {
		runtime.Gosched()
	}
	stop.Store(true)
	wg.Wait()
	if w := worst.Load(); w > 0 {
		t.Fatalf("an admission made the requests inside %d over the limit", w)
	}
	if got := c.InFlight(""); got != 0 {
		t.Fatalf("InFlight = %d after every permit was done", got)
	}
}

// TestALoweredConcurrencyLimitAdmitsNothingUntilEnoughEnd fills the
// processors' cells with free places, lowers the limit below what is
// held, and finds every processor refused until enough requests end.
func TestALoweredConcurrencyLimitAdmitsNothingUntilEnoughEnd(t *testing.T) {
	c, _ := NewConcurrency(ConcurrencySettings{Limit: 100000})
	c.places.grow()
	cells := len(c.places.cells.Load().cells)
	// Every cell gets free places: acquired from the pool, released into
	// each processor's cell.
	for h := range cells {
		for range 10 {
			if !c.places.acquireOn(h, 1) {
				t.Fatal("refused under the limit")
			}
		}
		for range 10 {
			c.places.releaseOn(h, 1)
		}
	}
	if c.places.taken() != int64(10*cells) || c.InFlight("") != 0 {
		t.Fatalf("taken %d, held %d: the cells did not keep the places", c.places.taken(), c.InFlight(""))
	}
	held := make([]Permit, 6)
	for i := range held {
		if !c.Acquire(&held[i], "").Allowed {
			t.Fatal("refused under the limit")
		}
	}
	if err := c.Set(4, nil); err != nil {
		t.Fatal(err)
	}
	for h := range 2 * cells {
		if c.places.acquireOn(h, 1) {
			t.Fatalf("processor %d admitted a request with 6 held over a limit of 4", h)
		}
	}
	for i := range 3 { // 3 held: one place free
		held[i].Done(Succeeded)
	}
	if !c.places.acquireOn(cells-1, 1) {
		t.Fatal("refused with 3 held under a limit of 4")
	}
	for h := range 2 * cells {
		if c.places.acquireOn(h, 1) {
			t.Fatalf("processor %d admitted a fifth request under a limit of 4", h)
		}
	}
}

// TestAReleaseThatReadThePoolBeforeASetKeepsNoPlaceInACell releases a
// place as a release that read the pool word and the limit just before a
// Set lowered the limit would: its place must go back to the pool, not to
// a cell, where it would admit a request over the new limit.
func TestAReleaseThatReadThePoolBeforeASetKeepsNoPlaceInACell(t *testing.T) {
	p := newPlacePool(100)
	p.grow()
	cs := p.cells.Load()
	for range 3 {
		if !p.acquireOn(0, 1) {
			t.Fatal("refused under the limit")
		}
	}
	w, lim := p.word.Load(), p.limit.Load() // the release reads, then stalls
	p.set(2)                                // 3 held over a limit of 2
	if p.deposit(cs, 0, 1, w, lim) {
		t.Fatal("a release that read the pool before the Set put its place in a cell")
	}
	p.releaseOn(0, 1) // as release goes on: to the pool
	for h := range 2 * len(cs.cells) {
		if p.acquireOn(h, 1) {
			t.Fatalf("processor %d admitted a third request under a limit of 2", h)
		}
	}
}

// TestAPlacePoolMakesItsCellsOnlyForGoroutinesThatTakeTurns: one goroutine
// acquiring and releasing alone never pays for cells; goroutines that take
// turns make them, with enough processors for them to pay.
func TestAPlacePoolMakesItsCellsOnlyForGoroutinesThatTakeTurns(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{cellsFromProcs - 1, cellsFromProcs} {
		runtime.GOMAXPROCS(procs)
		c, _ := NewConcurrency(ConcurrencySettings{Limit: 10})
		for range 10 * growAfter {
			var p Permit
			c.Acquire(&p, "")
			p.Done(Succeeded)
		}
		if c.places.cells.Load() != nil {
			t.Fatalf("%d processors: one goroutine alone made the cells", procs)
		}
		turn := make(chan struct{})
		done := make(chan struct{})
		go func() {
			for range turn {
				var p Permit
				c.Acquire(&p, "")
				p.Done(Succeeded)
				done <- struct{}{}
			}
		}()
		for range growAfter {
			var p Permit
			c.Acquire(&p, "")
			p.Done(Succeeded)
			turn <- struct{}{}
			<-done
		}
		close(turn)
		if made := c.places.cells.Load() != nil; made != (procs >= cellsFromProcs) {
			t.Fatalf("%d processors: two goroutines taking %d turns made the cells: %v", procs, growAfter, made)
		}
		if c.InFlight("") != 0 {
			t.Fatalf("InFlight = %d after every permit was done", c.InFlight(""))
		}
	}
}
