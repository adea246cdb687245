package window

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

func newTally(t testing.TB, buckets int, interval time.Duration, clk clock.Clock) *Counter {
	t.Helper()
	tl, err := NewCounter(buckets, interval, WithClock(clk), CachedSums())
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// The cached sums equal a full read of the ring, for every event
// (sums, minimums and maximums), whatever the bucket count and however far
// time jumps forwards.
func TestCachedSumsMatchAReadOfTheWholeRing(t *testing.T) {
	for _, buckets := range []int{1, 2, 3, 5, 40} {
		src := rand.New(rand.NewPCG(uint64(buckets), 7))
		interval := time.Duration(buckets) * 100 * time.Microsecond
		width := int64(interval) / int64(buckets)
		tl := newTally(t, buckets, interval, clock.NewManual(0))
		now := int64(src.IntN(1000))
		for step := 0; step < 20000; step++ {
			switch src.IntN(10) {
			case 0:
				now += width // exactly one bucket on
			case 1:
				now += int64(src.IntN(int(interval) * 2)) // possibly past the whole interval
			case 2, 3:
				now += int64(src.IntN(int(width)))
			default:
				tl.AddAt(now, Event(src.IntN(eventCount)), 1+src.Int64N(100))
			}
			if got, want := tl.SumsAt(now), tl.ringSumsAt(now); got != want {
				t.Fatalf("%d buckets, step %d, t=%d: totals %v, ring %v", buckets, step, now, got, want)
			}
		}
	}
}

// A reader whose time is in an older bucket than the base's reads the ring,
// and a reader in a newer bucket computes a new base.
func TestCachedSumsReadAtAnyTimeMatchTheRing(t *testing.T) {
	ms := int64(time.Millisecond)
	tl := newTally(t, 4, time.Second, clock.NewManual(0)) // buckets of 250 ms
	tl.AddAt(100*ms, Failed, 1)
	tl.AddAt(300*ms, Failed, 2)
	tl.AddAt(600*ms, Failed, 4)
	for _, now := range []int64{600 * ms, 100 * ms, 350 * ms, 700 * ms, 1100 * ms, 1300 * ms, 200 * ms} {
		if got, want := tl.SumAt(now, Failed), tl.ringSumsAt(now)[Failed]; got != want {
			t.Fatalf("at %v: %d failures, the ring holds %d", time.Duration(now), got, want)
		}
	}
	if got := tl.SumAt(1300*ms, Failed); got != 4 { // buckets 2..5: only the one at 600 ms
		t.Fatalf("at 1.3 s: %d failures, want 4", got)
	}
}

// A value added for a bucket already in the base shows from the next bucket
// on, as documented; a value for the current bucket shows at once.
func TestCachedSumsShowALateValueFromTheNextBucket(t *testing.T) {
	ms := int64(time.Millisecond)
	tl := newTally(t, 4, time.Second, clock.NewManual(0))
	tl.AddAt(600*ms, Failed, 1)
	if n := tl.SumAt(600*ms, Failed); n != 1 { // bucket 2 is current; its base is computed now
		t.Fatalf("failures = %d, want 1", n)
	}
	tl.AddAt(300*ms, Failed, 1) // bucket 1, already in the base
	if n := tl.SumAt(600*ms, Failed); n != 1 {
		t.Fatalf("a late failure was seen at once: %d", n)
	}
	if n := tl.SumAt(750*ms, Failed); n != 2 {
		t.Fatalf("a late failure was not seen in the next bucket: %d", n)
	}
	tl.AddAt(750*ms, Failed, 1)
	if n := tl.SumAt(750*ms, Failed); n != 3 {
		t.Fatalf("a failure in the current bucket was not seen at once: %d", n)
	}
}

// Under concurrent writers and readers on a moving clock the totals never
// exceed what was written, and equal it once the writers are done.
func TestCachedSumsUnderConcurrentWritersAndReaders(t *testing.T) {
	clk := clock.NewManual(0)
	tl := newTally(t, 20, time.Second, clk) // buckets of 50 ms; the test stays within 1 s
	const writers, per = 4, 5000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				tl.AddAt(clk.Now(), Failed, 1)
			}
		}()
	}
	var readers sync.WaitGroup
	for range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if n := tl.SumAt(clk.Now(), Failed); n < 0 || n > writers*per {
					t.Errorf("totals %d, outside [0, %d]", n, writers*per)
					return
				}
			}
		}()
	}
	for range 9 {
		clk.Advance(100 * time.Millisecond)
		runtime.Gosched() // let the writers spread over the buckets
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	// A writer that read the clock before an advance may have added to a
	// bucket already in the base; a bucket no reader has seen yet computes
	// its base after every writer is done.
	clk.Advance(50 * time.Millisecond)
	if n := tl.SumAt(clk.Now(), Failed); n != writers*per {
		t.Fatalf("failures = %d, want %d", n, writers*per)
	}
}

func TestCachedSumsApplyToACounterOnly(t *testing.T) {
	var ce *configError
	if _, err := NewHistogram(2, time.Second, CachedSums()); !errors.As(err, &ce) || ce.Field != "cached_sums" {
		t.Errorf("NewHistogram(CachedSums()) = %v, want a ConfigError naming cached_sums", err)
	}
	if _, err := NewCounter(2, time.Second, CachedSums()); err != nil {
		t.Errorf("NewCounter(CachedSums()) = %v", err)
	}
}

func TestCachedSumsDoNotAllocate(t *testing.T) {
	clk := clock.NewManual(int64(time.Hour))
	tl := newTally(t, 40, 10*time.Second, clk)
	var sink int64
	for name, f := range map[string]func(){
		"AddAt":           func() { tl.AddAt(clk.Now(), Succeeded, 1) },
		"SumsAt":          func() { sink += tl.SumsAt(clk.Now())[Succeeded] },
		"SumsAt, moving":  func() { sink += tl.SumsAt(clk.Advance(250 * time.Millisecond))[Succeeded] },
		"SumAt":           func() { sink += tl.SumAt(clk.Now(), Failed) },
		"Sums":            func() { sink += tl.Sums()[Failed] },
		"Add then SumsAt": func() { tl.Add(Failed, 1); sink += tl.Sums()[Failed] },
	} {
		if n := testing.AllocsPerRun(200, f); n != 0 {
			t.Errorf("%s allocates %.1f times per call, want 0", name, n)
		}
	}
}

// The whole-interval read of a 40-bucket ring: cached, and from the ring.
func BenchmarkCachedSumsAt(b *testing.B) {
	tl := newTally(b, 40, 10*time.Second, clock.NewManual(0))
	now := int64(5 * time.Second)
	for x := int64(0); x < now; x += int64(100 * time.Millisecond) {
		tl.AddAt(x, Succeeded, 1)
	}
	var sink int64
	b.Run("Cached", func(b *testing.B) {
		for range b.N {
			sink += tl.SumsAt(now)[Succeeded]
		}
	})
	b.Run("Ring", func(b *testing.B) {
		for range b.N {
			sink += tl.ringSumsAt(now)[Succeeded]
		}
	})
	_ = sink
}
