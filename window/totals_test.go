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

// TestTotalsCountEveryValueEverAdded adds random values at random times,
// forwards, backwards, late for the ring and far ahead, and checks after
// every add that the totals are the plain sums of every value added for a
// summed event, and 0 for the others.
func TestTotalsCountEveryValueEverAdded(t *testing.T) {
	for _, striped := range []bool{false, true} {
		if striped {
			spreadWrites(t)
		}
		rng := rand.New(rand.NewPCG(11, 12))
		ctr, err := NewCounter(5, 5*time.Second, WithTotals(), WithEvents(Allowed, RT, MinRT, Failed))
		if err != nil {
			t.Fatal(err)
		}
		if striped {
			ctr.r.contended()
		}
		var want Sums
		now := int64(time.Hour)
		for i := range 30000 {
			switch rng.IntN(20) {
			case 0:
				now += rng.Int64N(int64(20 * time.Second)) // across whole rings
			case 1, 2, 3:
				now += rng.Int64N(int64(time.Second))
			}
			at := now - rng.Int64N(int64(8*time.Second)) // sometimes late
			e, v := Event(rng.IntN(eventCount)), rng.Int64N(1000)-100
			ctr.AddAt(at, e, v) // recorded, or dropped as late: either way in the totals
			if e == Allowed || e == RT || e == Failed {
				want[e] += v
			}
			if got := ctr.Totals(); got != want {
				t.Fatalf("striped %v, step %d: totals %v, want %v", striped, i, got, want)
			}
		}
		if ctr.r.late.Load() == 0 {
			t.Fatal("no value was late: the test misses the late path")
		}
	}
}

// TestTotalsAreExactAndNeverGoBackUnderConcurrency races writers (more
// goroutines than cores, on random stripes) across bucket edges and whole
// rings with readers of the totals: a total read never goes down and never
// exceeds what was written, and once the writers stop it is exactly what
// they wrote.
func TestTotalsAreExactAndNeverGoBackUnderConcurrency(t *testing.T) {
	spreadWrites(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	clk := clock.NewManual(0)
	ctr, _ := NewCounter(4, 4*time.Millisecond, WithClock(clk), WithTotals())
	var written atomic.Int64
	stop := make(chan struct{})
	var wg, readers sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				at := clk.Now() - int64(i%3)*int64(3*time.Millisecond) // some late
				ctr.AddAt(at, Allowed, 2)
				written.Add(2)
				if i%5 == 0 {
					runtime.Gosched()
				}
			}
		}()
	}
	for range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			var last int64
			for {
				select {
				case <-stop:
					return
				default:
				}
				got := ctr.Totals()[Allowed]
				if w := written.Load() + 6*2; got < last || got > w {
					t.Errorf("total %d after %d, with at most %d written", got, last, w)
					return
				}
				last = got
			}
		}()
	}
	for i := range 3000 {
		if i%100 == 0 {
			clk.Advance(4 * time.Millisecond)
		} else {
			clk.Advance(300 * time.Microsecond)
		}
		runtime.Gosched()
	}
	close(stop)
	wg.Wait()
	readers.Wait()
	if got, want := ctr.Totals()[Allowed], written.Load(); got != want {
		t.Fatalf("total %d, %d written", got, want)
	}
}

func TestTotalsApplyToCountersOnly(t *testing.T) {
	if _, err := NewSketch(time.Second, WithTotals()); err == nil {
		t.Error("WithTotals given to a Sketch: no error")
	}
	c, _ := NewCounter(2, time.Second)
	c.Add(Allowed, 3)
	if got := c.Totals(); got != (Sums{}) {
		t.Errorf("a Counter without WithTotals: totals %v", got)
	}
}

// TestTotalsWaitForASlotTakenButNotYetRetired stops a writer between taking
// a slot for a new bucket (its state word says so) and retiring the old
// bucket's values: a reader then must wait, not skip the slot and report
// totals that went back.
func TestTotalsWaitForASlotTakenButNotYetRetired(t *testing.T) {
	ctr, _ := NewCounter(4, 4*time.Second, WithTotals(), WithEvents(Allowed))
	now := int64(time.Hour)
	ctr.AddAt(now, Allowed, 5)
	r := ctr.r
	b := r.bucketOf(now)
	s := r.slotOf(b)
	later := b + uint64(r.n)                          // the bucket that reuses the slot
	if !r.words[s].CompareAndSwap(b<<1, later<<1|1) { // the writer's state CAS
		t.Fatal("the slot does not hold the bucket written")
	}
	started, got := make(chan struct{}), make(chan int64)
	go func() {
		close(started)
		got <- ctr.Totals()[Allowed]
	}()
	<-started
	for range 100 {
		runtime.Gosched() // let the reader look while the slot is half taken
	}
	r.tot.retire(r, r.words, s, b, later) // the writer goes on
	r.words[s].Store(later << 1)
	if v := <-got; v != 5 {
		t.Fatalf("totals read %d while a slot was being taken, want 5", v)
	}
}

// TestTotalsOfEveryNumberOfEventsCountEveryValue: a Counter keeping
// totals of 1 to every event (made with its retired sums in its own
// allocation, sized by their number) adds every value of each summed event
// it records, across whole rings, and keeps each event's apart.
func TestTotalsOfEveryNumberOfEventsCountEveryValue(t *testing.T) {
	for k := 1; k <= eventCount; k++ {
		events := make([]Event, k)
		for i := range events {
			events[i] = Event(eventCount - 1 - i) // the summed ones last
		}
		ctr, err := NewCounter(4, 4*time.Second, WithTotals(), WithEvents(events...))
		if err != nil {
			t.Fatal(err)
		}
		if n := len(ctr.r.tot.retired); n != k {
			t.Fatalf("%d events: %d retired sums", k, n)
		}
		var want Sums
		now := int64(time.Hour)
		for i := range 200 {
			now += int64(700 * time.Millisecond) // every bucket retired many times
			for j, e := range events {
				v := int64(i*10 + j + 1)
				ctr.AddAt(now, e, v)
				if e < MinRT {
					want[e] += v
				}
			}
		}
		if got := ctr.Totals(); got != want {
			t.Fatalf("%d events %v: totals %v, want %v", k, events, got, want)
		}
	}
}
