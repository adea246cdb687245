package breaker

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/window"
)

// The cached totals equal a full read of the ring, whatever the bucket count
// and however time jumps (forwards).
func TestTallyMatchesTheRing(t *testing.T) {
	events := []window.Event{window.Succeeded, window.Failed, window.Blocked, window.Slow}
	for _, buckets := range []int{1, 2, 5, 40} {
		src := rand.New(rand.NewPCG(uint64(buckets), 7))
		interval := time.Duration(buckets) * 100 * time.Microsecond
		width := int64(interval) / int64(buckets)
		tl := newTally(interval, buckets, clock.NewManual(0))
		now := int64(src.IntN(1000))
		for step := 0; step < 20000; step++ {
			switch src.IntN(10) {
			case 0:
				now += width // exactly one bucket on
			case 1:
				now += int64(src.IntN(int(interval) * 2)) // possibly past the whole window
			case 2, 3:
				now += int64(src.IntN(int(width)))
			default:
				tl.add(now, events[src.IntN(len(events))])
			}
			if got, want := tl.at(now), tl.full(now); got != want {
				t.Fatalf("%d buckets, step %d, t=%d: totals %+v, ring %+v", buckets, step, now, got, want)
			}
		}
	}
}

// An outcome recorded for a bucket already in the base shows from the next
// bucket on, as documented.
func TestTallyLateOutcomeShowsFromTheNextBucket(t *testing.T) {
	tl := newTally(time.Second, 4, clock.NewManual(0))
	tl.add(600*ms, window.Failed)
	if c := tl.at(600 * ms); c.failures != 1 { // bucket 2 is current; base computed for it
		t.Fatalf("failures = %d, want 1", c.failures)
	}
	tl.add(300*ms, window.Failed) // bucket 1, already in the base
	if c := tl.at(600 * ms); c.failures != 1 {
		t.Fatalf("late failure seen at once: %d", c.failures)
	}
	if c := tl.at(750 * ms); c.failures != 2 {
		t.Fatalf("late failure not seen in the next bucket: %d", c.failures)
	}
}

// Under concurrent writers and readers the totals never exceed what was
// written, and equal it once the writers are done.
func TestTallyConcurrent(t *testing.T) {
	clk := clock.NewManual(0)
	tl := newTally(time.Second, 20, clk) // buckets of 50 ms; the test stays within 1 s
	const writers, per = 4, 5000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				tl.add(clk.Now(), window.Failed)
			}
		}()
	}
	var readers sync.WaitGroup
	readers.Add(1)
	go func() {
		defer readers.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if c := tl.at(clk.Now()); c.failures > writers*per {
				t.Errorf("totals %d exceed what was written", c.failures)
				return
			}
		}
	}()
	for i := 0; i < 9; i++ {
		clk.Advance(100 * time.Millisecond)
		time.Sleep(time.Millisecond) // let the writers spread over the buckets
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	// A writer that read the clock before an advance may have added to a
	// bucket already in the base; a bucket no reader has seen yet computes
	// its base after every writer is done.
	clk.Advance(50 * time.Millisecond)
	if c := tl.at(clk.Now()); c.failures != writers*per {
		t.Fatalf("failures = %d, want %d", c.failures, writers*per)
	}
}
