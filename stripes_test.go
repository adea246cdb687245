package slidegate

import (
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// TestHotResourceCountsExactlyUnderContention drives one resource, with a
// QPS rule and a breaker, from more goroutines than cores while a driver
// moves the clock across bucket edges: the resource's counts and the
// limiter's stripes are written from many cores at once. Once the traffic
// stops, every total must be exact, nothing must be left in flight, and no
// second of the clock may hold more allowed requests than the limit.
func TestHotResourceCountsExactlyUnderContention(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	const limit, workers = 5000, 8
	g, clk := newGuard(t, Rules{
		Flow:     []FlowRule{{Resource: "hot", Limit: limit, Interval: Duration(time.Second)}},
		Breakers: []BreakerRule{{Resource: "hot", Strategy: ErrorRatioBreaker, Threshold: 0.99}},
	})
	start := clk.Now()
	var allowed, blocked, failed, ops atomic.Int64
	var times sync.Map // worker → []int64, the times of its allowed requests
	stop := make(chan struct{})
	var wg sync.WaitGroup
	boom := errors.New("boom")
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []int64
			defer func() { times.Store(w, mine) }()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ops.Add(1)
				now := clk.Now()
				e, err := g.EnterAt(bg, now, "hot")
				if err != nil {
					var be *BlockError
					if !errors.As(err, &be) {
						t.Errorf("Enter: %v", err)
						return
					}
					blocked.Add(1)
					continue
				}
				allowed.Add(1)
				mine = append(mine, now)
				var ferr error
				if i%50 == 0 {
					ferr = boom
					failed.Add(1)
				}
				e.ExitAt(clk.Now(), ferr)
				if i%7 == 0 {
					runtime.Gosched()
				}
			}
		}()
	}
	// Each 5 ms of the clock sees at least 60 requests: 12,000 a second,
	// well over the limit, however slowly the workers run.
	for range 400 {
		for target := ops.Load() + 60; ops.Load() < target; {
			runtime.Gosched()
		}
		clk.Advance(5 * time.Millisecond)
	}
	close(stop)
	wg.Wait()

	s := stats(t, g, "hot")
	tot := s.Totals
	if tot.Allowed != allowed.Load() || tot.Failed != failed.Load() || tot.Succeeded != allowed.Load()-failed.Load() {
		t.Errorf("totals %+v; the workers saw %d allowed, %d of them failed", tot, allowed.Load(), failed.Load())
	}
	if tot.Blocked() != blocked.Load() {
		t.Errorf("%d blocked in the totals, %d seen", tot.Blocked(), blocked.Load())
	}
	if s.InFlight != 0 {
		t.Errorf("%d in flight after the traffic stopped", s.InFlight)
	}
	// A request is recorded at the time it read, but the limiter counts it
	// when its turn comes, in the bucket open then (see flow.QPS), so that
	// the requests read in one second are at most the limit plus those
	// between reading the time and being counted: one per worker.
	var all []int64
	times.Range(func(_, v any) bool { all = append(all, v.([]int64)...); return true })
	slices.Sort(all)
	for i, j := 0, 0; i < len(all); i++ {
		for all[i]-all[j] >= int64(time.Second) {
			j++
		}
		if n := i - j + 1; n > limit+workers {
			t.Fatalf("%d requests allowed within one second ending at %v, over the limit %d and the %d in transit", n, time.Duration(all[i]-start), limit, workers)
		}
	}
	if blocked.Load() == 0 || allowed.Load() < limit {
		t.Fatalf("%d allowed and %d blocked in 2 s of a limit of %d a second: the test did not reach the limit", allowed.Load(), blocked.Load(), limit)
	}
}

// TestEntriesFillTheirCacheLines pins the size that keeps two processors'
// entries off each other's cache lines (see entry).
func TestEntriesFillTheirCacheLines(t *testing.T) {
	if n := unsafe.Sizeof(entry{}); n != 128 {
		t.Fatalf("an entry takes %d bytes, want 128", n)
	}
	if n := unsafe.Sizeof(hold{}); n%128 != 0 {
		t.Fatalf("a hold takes %d bytes, want a multiple of 128", n)
	}
}

// TestStripesFillTheirCacheLines pins the sizes that keep the stripes made
// under contention off each other's cache lines.
func TestStripesFillTheirCacheLines(t *testing.T) {
	if n := unsafe.Sizeof(paddedBlockedTotals{}); n != 128 {
		t.Fatalf("a stripe of blocked totals takes %d bytes, want 128", n)
	}
}
