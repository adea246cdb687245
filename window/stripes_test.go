package window

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// spreadWrites makes every write pick a random stripe, as writers on many
// processors would, for the rest of the test.
func spreadWrites(t *testing.T) {
	t.Helper()
	old := hint
	hint = func() int { return rand.IntN(1 << 20) }
	t.Cleanup(func() { hint = old })
}

// TestContentionAddsStripes has many goroutines add to one Counter at once:
// the compare-and-swaps they lose must make the Counter add stripes, and
// every add must still be counted.
func TestContentionAddsStripes(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	ctr, err := NewCounter(4, 4*time.Hour, WithClock(clock.NewManual(0)))
	if err != nil {
		t.Fatal(err)
	}
	var added atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(20 * time.Second) // only a machine that never runs two goroutines at once gets near it
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !ctr.r.striped() && time.Now().Before(deadline) {
				for range 1000 {
					if ctr.AddAt(0, Allowed, 1) {
						added.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	if !ctr.r.striped() {
		t.Fatalf("no stripes after %d adds from 8 goroutines", added.Load())
	}
	if got := ctr.SumAt(0, Allowed); got != added.Load() {
		t.Fatalf("sum %d, added %d", got, added.Load())
	}
}

// TestStripedCounterMatchesUnstriped drives a Counter whose writes go to
// random stripes and a Counter without stripes with the same random adds,
// and compares every read. Writes stay within the interval of the latest
// time written and reads are at that time or later: there, stripes change
// nothing (see stripes.go for the one difference at earlier times).
func TestStripedCounterMatchesUnstriped(t *testing.T) {
	spreadWrites(t)
	rng := rand.New(rand.NewPCG(5, 6))
	const n, w = 8, int64(100 * time.Millisecond)
	striped, _ := NewCounter(n, time.Duration(n*w))
	plain, _ := NewCounter(n, time.Duration(n*w))
	striped.r.contended()
	if !striped.r.striped() || plain.r.striped() {
		t.Fatal("the striped Counter must have stripes and the plain one none")
	}
	sView, _ := striped.View(time.Duration(3 * w))
	pView, _ := plain.View(time.Duration(3 * w))
	latest := int64(time.Hour)
	for i := range 50000 {
		if rng.IntN(10) == 0 {
			latest += rng.Int64N(3 * w) // sometimes past a whole ring
		}
		at := latest - rng.Int64N((n-1)*w) // within the n buckets ending with latest's
		e, v := Event(rng.IntN(eventCount)), rng.Int64N(1000)-100
		if a, b := striped.AddAt(at, e, v), plain.AddAt(at, e, v); a != b {
			t.Fatalf("step %d: AddAt reported %v striped, %v plain", i, a, b)
		}
		read := latest + rng.Int64N(2*w)
		if a, b := striped.SumsAt(read), plain.SumsAt(read); a != b {
			t.Fatalf("step %d: sums %v striped, %v plain", i, a, b)
		}
		if a, b := sView.SumsAt(read), pView.SumsAt(read); a != b {
			t.Fatalf("step %d: view sums %v striped, %v plain", i, a, b)
		}
		for _, e := range []Event{Allowed, RT, MinRT, MaxConcurrency} {
			if a, b := sView.MaxBucketAt(read, e), pView.MaxBucketAt(read, e); a != b {
				t.Fatalf("step %d: MaxBucket(%v) %d striped, %d plain", i, e, a, b)
			}
		}
	}
	if striped.r.late.Load() != plain.r.late.Load() {
		t.Fatalf("late %d striped, %d plain", striped.r.late.Load(), plain.r.late.Load())
	}
}

// TestStripedWritersLoseNothing races writers on more goroutines than
// cores, each write going to a random stripe, against a clock moved across
// bucket edges and whole rings: once they stop, every accepted add must be
// counted in its bucket.
func TestStripedWritersLoseNothing(t *testing.T) {
	spreadWrites(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	const n, w = 4, int64(time.Millisecond)
	c := clock.NewManual(0)
	ctr, _ := NewCounter(n, time.Duration(n*w), WithClock(c))
	ctr.r.contended()
	// accepted[b] counts the adds accepted for bucket b of the clock.
	const rounds = 400
	var accepted [rounds*2 + 8]atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				now := c.Now()
				if ctr.AddAt(now, Allowed, 1) {
					accepted[now/w].Add(1)
				}
				if i%7 == 0 {
					runtime.Gosched()
				}
			}
		}()
	}
	for i := range rounds {
		if i%50 == 0 {
			c.Advance(time.Duration(n * w)) // a whole ring
		} else {
			c.Advance(time.Duration(w))
		}
		runtime.Gosched()
	}
	close(stop)
	wg.Wait()
	now := c.Now()
	one, _ := ctr.View(time.Duration(w))
	for b := now/w - n + 1; b <= now/w; b++ {
		if got, want := one.SumAt(b*w, Allowed), accepted[b].Load(); got != want {
			t.Errorf("bucket %d holds %d, %d adds were accepted for it", b, got, want)
		}
	}
	var total int64
	for b := now/w - n + 1; b <= now/w; b++ {
		total += accepted[b].Load()
	}
	if got := ctr.SumAt(now, Allowed); got != total {
		t.Errorf("the interval holds %d, %d adds were accepted in it", got, total)
	}
}

// TestStripedStaleWritersNeverLeakIntoALaterBucket is
// TestStaleWritersNeverLeakIntoALaterBucket with every write on a random
// stripe: the protocol holds in each.
func TestStripedStaleWritersNeverLeakIntoALaterBucket(t *testing.T) {
	spreadWrites(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	const writers, perWriter = 8, 2000
	for round := range 10 {
		ctr, _ := NewCounter(4, 4*time.Millisecond)
		ctr.r.contended()
		lap := int64(4 * time.Millisecond)
		t0 := int64(round) * int64(time.Millisecond)
		t1 := t0 + lap
		var accepted [2]atomic.Int64
		var wg sync.WaitGroup
		for g := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range perWriter {
					which := (g + i) % 2
					if i < perWriter/4 {
						which = 0
					}
					if ctr.AddAt([]int64{t0, t1}[which], Allowed, 1) {
						accepted[which].Add(1)
					}
				}
			}()
		}
		wg.Wait()
		if total := accepted[0].Load() + accepted[1].Load() + ctr.r.late.Load(); total != writers*perWriter {
			t.Fatalf("round %d: accepted + late = %d, want %d", round, total, writers*perWriter)
		}
		one, _ := ctr.View(time.Millisecond)
		if got, want := one.SumAt(t1, Allowed), accepted[1].Load(); got != want {
			t.Fatalf("round %d: later bucket holds %d, %d adds were accepted for it", round, got, want)
		}
	}
}

// TestStripedCachedSumsAndHistogramReadEveryStripe checks the other readers
// of a striped ring: a Counter's cached sums and a Histogram's
// quantiles combine every stripe.
func TestStripedCachedSumsAndHistogramReadEveryStripe(t *testing.T) {
	spreadWrites(t)
	clk := clock.NewManual(0)
	tl, _ := NewCounter(10, 10*time.Second, WithClock(clk), CachedSums())
	tl.r.contended()
	h, _ := NewHistogram(4, 4*time.Second, WithClock(clk))
	h.r.contended()
	plain, _ := NewHistogram(4, 4*time.Second, WithClock(clk))
	rng := rand.New(rand.NewPCG(7, 8))
	var want Sums
	for i := range 5000 {
		d := time.Duration(rng.Int64N(int64(time.Second)))
		tl.Add(Succeeded, 1)
		want[Succeeded]++
		h.Record(d)
		plain.Record(d)
		if i%100 == 0 {
			if got := tl.Sums(); got[Succeeded] != want[Succeeded] {
				t.Fatalf("step %d: cached sums read %d successes, %d added", i, got[Succeeded], want[Succeeded])
			}
		}
		if i%1000 == 999 {
			clk.Advance(time.Second)
		}
	}
	if got := tl.Sums(); got[Succeeded] != want[Succeeded] {
		t.Fatalf("cached sums read %d successes, %d added", got[Succeeded], want[Succeeded])
	}
	if a, b := h.Summary(), plain.Summary(); a != b {
		t.Fatalf("striped histogram %+v, plain %+v", a, b)
	}
}
