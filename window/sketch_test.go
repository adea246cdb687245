package window

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/slidegate/slidegate/clock"
)

func newTestSketch(t testing.TB, interval time.Duration) (*Sketch, *clock.Manual) {
	t.Helper()
	clk := clock.NewManual(0)
	k, err := NewSketch(interval, WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	return k, clk
}

// sketchWithin reports whether got is within the Sketch's stated error of
// want: sketchError relative from 2.048 µs up, 128 ns below.
func sketchWithin(got, want int64) bool {
	if want < 1<<sketchLinear {
		return math.Abs(float64(got-want)) <= 128
	}
	return math.Abs(float64(got-want)) <= sketchError*float64(want)
}

// TestSketchBinsAreWithinTheStatedError reports, for latencies all over the
// range and at every bin edge, the latency a bin of one reports: it must be
// within sketchError of the latency.
func TestSketchBinsAreWithinTheStatedError(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var worst float64
	check := func(d int64) {
		c, j := sketchBin(d)
		got := sketchValue(c, j)
		if !sketchWithin(got, d) {
			t.Fatalf("latency %d ns: bin (%d, %d) reports %d ns", d, c, j, got)
		}
		if d >= 1<<sketchLinear {
			worst = max(worst, math.Abs(float64(got-d))/float64(d))
		}
	}
	for d := int64(0); d < 1<<14; d++ {
		check(d)
	}
	for e := sketchLinear; e < 38; e++ {
		lo := int64(1) << e
		for j := 0; j <= sketchSub; j++ { // every edge, and a latency either side of it
			edge := int64(float64(lo) * math.Exp2(float64(j)/sketchSub))
			for _, d := range []int64{edge - 1, edge, edge + 1} {
				if d >= lo && d < 2*lo {
					check(d)
				}
			}
		}
		for range 20000 {
			check(lo + rng.Int64N(lo))
		}
	}
	check(int64(sketchRange) - 1)
	if worst < 0.04 {
		t.Fatalf("the worst error seen is %.4f: the bins are finer than the stated error says", worst)
	}
	t.Logf("worst relative error %.4f%% (stated %.2f%%)", worst*100, sketchError*100)
}

// TestSketchQuantilesMatchExactOnes records latencies from several
// distributions and compares each quantile and the maximum with the exact
// nearest-rank value of what was recorded.
func TestSketchQuantilesMatchExactOnes(t *testing.T) {
	dists := map[string]func(*rand.Rand) int64{
		"uniform 0-2ms":     func(r *rand.Rand) int64 { return r.Int64N(int64(2 * time.Millisecond)) },
		"lognormal ~1ms":    func(r *rand.Rand) int64 { return int64(math.Exp(r.NormFloat64()*1.5 + 13.8)) },
		"bimodal 50µs / 3s": func(r *rand.Rand) int64 { return []int64{50e3, 3e9}[r.IntN(2)] + r.Int64N(1000) },
		"sub-µs":            func(r *rand.Rand) int64 { return r.Int64N(3000) },
		"beyond the range":  func(r *rand.Rand) int64 { return int64(sketchRange) + r.Int64N(1e9) - 1e8 },
	}
	for name, dist := range dists {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, uint64(len(name))))
			k, _ := newTestSketch(t, 10*time.Second)
			var all []int64
			for range 20000 {
				d := dist(rng)
				k.Record(time.Duration(d))
				all = append(all, d)
			}
			slices.Sort(all)
			s := k.Summary()
			if s.Count != int64(len(all)) || s.Max != time.Duration(all[len(all)-1]) {
				t.Fatalf("count %d, max %v; want %d, %v", s.Count, s.Max, len(all), time.Duration(all[len(all)-1]))
			}
			for _, q := range []float64{0, 0.01, 0.5, 0.9, 0.99, 0.999, 1} {
				want := all[max(int(math.Ceil(q*float64(len(all))))-1, 0)]
				got := int64(k.Quantile(q))
				if want >= int64(sketchRange) {
					if got != all[len(all)-1] {
						t.Errorf("q %v: %d, want the maximum %d for latencies beyond the range", q, got, all[len(all)-1])
					}
					continue
				}
				if !sketchWithin(got, want) {
					t.Errorf("q %v: %v, exact %v", q, time.Duration(got), time.Duration(want))
				}
			}
		})
	}
}

// TestSketchSlidesByHalves checks what a read covers: the half holding now
// and the one before it.
func TestSketchSlidesByHalves(t *testing.T) {
	k, clk := newTestSketch(t, 10*time.Second)
	k.Record(time.Millisecond)
	clk.Advance(5 * time.Second) // the next half
	k.Record(3 * time.Millisecond)
	if s := k.Summary(); s.Count != 2 || s.Max != 3*time.Millisecond {
		t.Fatalf("two halves: %+v", s)
	}
	clk.Advance(5 * time.Second) // the first half leaves
	if s := k.Summary(); s.Count != 1 || s.Max != 3*time.Millisecond || !sketchWithin(int64(s.P50), int64(3*time.Millisecond)) {
		t.Fatalf("one half: %+v", s)
	}
	k.Record(time.Microsecond * 10) // reuses the first half's words
	if s := k.Summary(); s.Count != 2 || s.Max != 3*time.Millisecond {
		t.Fatalf("after reuse: %+v", s)
	}
	clk.Advance(time.Hour)
	if s := k.Summary(); s != (Summary{}) {
		t.Fatalf("an hour later: %+v", s)
	}
	if !k.RecordAt(clk.Now(), time.Second) || k.RecordAt(0, time.Second) || k.late.Load() != 1 {
		t.Fatalf("a latency for a half long replaced must be dropped and counted as late, late = %d", k.late.Load())
	}
}

// TestSketchConcurrentWritersLoseNothing races writers (more goroutines than
// cores, some on random stripes) with a clock moving by halves and whole
// intervals: once they stop, the two halves read hold exactly the latencies
// accepted in them, and the maximum is the largest of those.
func TestSketchConcurrentWritersLoseNothing(t *testing.T) {
	for _, striped := range []bool{false, true} {
		if striped {
			spreadWrites(t)
		}
		func() {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
			const half = int64(time.Millisecond)
			k, clk := newTestSketch(t, 2*time.Millisecond)
			if striped {
				k.contended()
			}
			const rounds = 300
			var accepted [rounds*4 + 8]atomic.Int64
			var maxIn [rounds*4 + 8]atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(g), 9))
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						now := clk.Now()
						d := rng.Int64N(int64(time.Second))
						if k.RecordAt(now, time.Duration(d)) {
							accepted[now/half].Add(1)
							for m := maxIn[now/half].Load(); d > m && !maxIn[now/half].CompareAndSwap(m, d); m = maxIn[now/half].Load() {
							}
						}
						if i%5 == 0 {
							runtime.Gosched()
						}
					}
				}()
			}
			for i := range rounds {
				if i%40 == 0 {
					clk.Advance(2 * time.Millisecond) // a whole interval
				} else {
					clk.Advance(time.Millisecond)
				}
				runtime.Gosched()
			}
			close(stop)
			wg.Wait()
			now := clk.Now()
			b := now / half
			s := k.SummaryAt(now)
			if want := accepted[b].Load() + accepted[b-1].Load(); s.Count != want {
				t.Fatalf("striped %v: the halves hold %d latencies, %d were accepted in them", striped, s.Count, want)
			}
			if want := max(maxIn[b].Load(), maxIn[b-1].Load()); int64(s.Max) != want {
				t.Fatalf("striped %v: maximum %v, want %v", striped, s.Max, time.Duration(want))
			}
		}()
	}
}

// TestSketchRecordingDoesNotAllocate checks that recording allocates nothing
// once its chunks exist, and reading nothing at all.
func TestSketchRecordingDoesNotAllocate(t *testing.T) {
	k, clk := newTestSketch(t, 10*time.Second)
	k.Record(time.Millisecond)
	if n := testing.AllocsPerRun(1000, func() {
		clk.Advance(time.Millisecond)
		k.Record(time.Millisecond + time.Duration(clk.Now()%1000))
		_ = k.Summary()
	}); n != 0 {
		t.Fatalf("%v allocations per record and read", n)
	}
}

// TestSketchMemory measures what a Sketch takes on the heap, with one
// latency and with latencies over 1 µs to 1 s.
func TestSketchMemory(t *testing.T) {
	const n = 2000
	measure := func(fill func(*Sketch)) float64 {
		ks := make([]*Sketch, n)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range ks {
			ks[i], _ = NewSketch(10 * time.Second)
			fill(ks[i])
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(ks)
		return float64(after.HeapAlloc-before.HeapAlloc) / n
	}
	one := measure(func(k *Sketch) { k.Record(time.Millisecond) })
	wide := measure(func(k *Sketch) {
		for d := time.Microsecond; d < time.Second; d *= 2 {
			k.Record(d)
		}
	})
	t.Logf("bytes per Sketch: %.0f with one latency, %.0f with latencies from 1 µs to 1 s", one, wide)
	if one > 560 || wide > 4300 {
		t.Fatalf("bytes per Sketch: %.0f with one latency (want ≤ 560), %.0f from 1 µs to 1 s (want ≤ 4300)", one, wide)
	}
}

func TestSketchRejectsBadShapes(t *testing.T) {
	for _, iv := range []time.Duration{0, -time.Second, time.Nanosecond, 3} {
		if _, err := NewSketch(iv); err == nil {
			t.Errorf("NewSketch(%v): no error", iv)
		}
	}
	if _, err := NewSketch(time.Second, Compact()); err == nil {
		t.Error("NewSketch with Compact: no error")
	}
}

// TestSketchStripesFillTheirCacheLines pins the size that keeps the stripes
// made under contention off each other's cache lines.
func TestSketchStripesFillTheirCacheLines(t *testing.T) {
	if n := unsafe.Sizeof(paddedSketchStripe{}); n%128 != 0 {
		t.Fatalf("a sketch stripe takes %d bytes, want a multiple of 128", n)
	}
}
