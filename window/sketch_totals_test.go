package window

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/latbin"
)

// modelBin is the bin of latency d in [0, sketchRange) found by searching
// the edges binLow states.
func modelBin(d int64) int {
	for i := sketchBins - 1; i >= 0; i-- {
		if int64(binLow(i)) <= d {
			return i
		}
	}
	panic("no bin")
}

// TestSketchBinEdgesAreTheStatedOnes checks binLow against the
// intended edges, 256·i ns and 2^e·2^(j/8) rounded up by at most 0.1%, and
// against what the Sketch records: a latency at an edge is counted in the
// bin the edge opens, one a nanosecond below in the bin before.
func TestSketchBinEdgesAreTheStatedOnes(t *testing.T) {
	for i := 1; i <= sketchBins; i++ {
		lo, prev := int64(binLow(i)), int64(binLow(i-1))
		if lo <= prev {
			t.Fatalf("bin %d starts at %d ns, not above bin %d's %d", i, lo, i-1, prev)
		}
		if i == sketchBins {
			break
		}
		var want float64
		if i < sketchSub {
			want = float64(256 * i)
		} else {
			want = math.Exp2(float64(i/sketchSub+sketchLinear-1) + float64(i%sketchSub)/sketchSub)
		}
		if float64(lo) < want-1 || float64(lo) > want*(1+1.0/1024)+1 {
			t.Errorf("bin %d starts at %d ns, want %.0f rounded up by at most 0.1%%", i, lo, want)
		}
		if v := int64(binValue(i)); v < lo || v >= int64(binLow(i+1)) {
			t.Errorf("bin %d reports %d ns, outside [%d, %d)", i, v, lo, binLow(i+1))
		}
		k, _ := newTestSketch(t, time.Second)
		k.RecordAt(0, time.Duration(lo))
		k.RecordAt(0, time.Duration(lo-1))
		var tot SketchTotals
		k.TotalsInto(&tot)
		if tot.Bins[i] != 1 || tot.Bins[i-1] != 1 || tot.Count() != 2 {
			t.Fatalf("latencies %d and %d ns: bins %d and %d count %d and %d of %d, want 1 and 1 of 2",
				lo, lo-1, i, i-1, tot.Bins[i], tot.Bins[i-1], tot.Count())
		}
	}
}

// TestSketchTotalsMatchAModel records random latencies and batches over
// many intervals, on the manual clock, late ones included, and compares
// the totals with a count kept by brute force.
func TestSketchTotalsMatchAModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	k, clk := newTestSketch(t, 2*time.Second)
	var want SketchTotals
	for range 20000 {
		var d int64
		switch rng.IntN(6) {
		case 0:
			d = rng.Int64N(1 << sketchLinear) // linear bins
		case 1:
			d = int64(sketchRange) + rng.Int64N(1<<40) // beyond every bin
		case 2:
			d = int64(binLow(rng.IntN(sketchBins))) - rng.Int64N(2) // an edge, or just below it
		case 3:
			d = -rng.Int64N(1000) // counts as 0
		default:
			d = int64(math.Exp2(rng.Float64() * 38)) // log-uniform over the range
		}
		n := int64(1)
		if rng.IntN(4) == 0 {
			n = rng.Int64N(100) - 5 // a batch; below 1 counts as 1
		}
		now := clk.Now()
		if rng.IntN(10) == 0 {
			now -= rng.Int64N(int64(4 * time.Second)) // late: the window may drop it, the totals may not
		}
		k.RecordBatchAt(now, time.Duration(d), n)
		switch dd := max(d, 0); {
		case dd >= int64(sketchRange):
			want.Over += max(n, 1)
		default:
			want.Bins[modelBin(dd)] += max(n, 1)
		}
		clk.Advance(time.Duration(rng.Int64N(int64(300 * time.Millisecond))))
	}
	var got SketchTotals
	k.TotalsInto(&got)
	if got != want {
		for i := range got.Bins {
			if got.Bins[i] != want.Bins[i] {
				t.Errorf("bin %d [%v, %v): %d, want %d", i, binLow(i), binLow(i+1), got.Bins[i], want.Bins[i])
			}
		}
		t.Fatalf("over %d, want %d; count %d, want %d", got.Over, want.Over, got.Count(), want.Count())
	}
	if k.late.Load() == 0 {
		t.Fatal("no latency was late: the test does not test what it says")
	}
}

// TestSketchTotalsCountEveryWriter records from several goroutines at once,
// which makes the Sketch add stripes, and checks that the totals count
// every latency once.
func TestSketchTotalsCountEveryWriter(t *testing.T) {
	k, clk := newTestSketch(t, time.Second)
	const writers, each = 8, 5000
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				k.RecordAt(clk.Now(), time.Duration((w*each+i)%4096)*time.Microsecond)
			}
		}()
	}
	var mid SketchTotals
	for range 100 {
		k.TotalsInto(&mid) // reads while writing: for the race detector
	}
	wg.Wait()
	var got, want SketchTotals
	k.TotalsInto(&got)
	for w := range writers {
		for i := range each {
			want.Bins[modelBin(int64((w*each+i)%4096)*int64(time.Microsecond))]++
		}
	}
	if got != want {
		t.Fatalf("totals count %d latencies, want %d", got.Count(), want.Count())
	}
}

func TestSketchTotalsAllocateNothing(t *testing.T) {
	k, clk := newTestSketch(t, time.Second)
	k.RecordAt(0, time.Millisecond) // the chunk, allocated once
	var tot SketchTotals
	if n := testing.AllocsPerRun(1000, func() {
		clk.Advance(time.Millisecond)
		k.RecordBatchAt(clk.Now(), time.Millisecond+time.Duration(clk.Now()%1000), 3)
		k.TotalsInto(&tot)
	}); n != 0 {
		t.Fatalf("%v allocations per record and read of the totals", n)
	}
}

func TestSketchTotalsSaturate(t *testing.T) {
	tot := SketchTotals{Over: math.MaxInt64 - 1}
	tot.Bins[3] = 5
	if got := tot.Count(); got != math.MaxInt64 {
		t.Fatalf("Count = %d, want math.MaxInt64", got)
	}
	if got := addCount(math.MaxInt64-1, 5); got != math.MaxInt64 {
		t.Fatalf("addCount = %d, want math.MaxInt64", got)
	}
	if got := addCount(0, math.MaxUint64); got != math.MaxInt64 {
		t.Fatalf("addCount of a word past 2^63 = %d, want math.MaxInt64", got)
	}
}

// binLow and binValue are a bin's lowest latency and the latency a Sketch
// reports for it.
func binLow(i int) time.Duration   { return time.Duration(latbin.Low(i)) }
func binValue(i int) time.Duration { return time.Duration(latbin.Value(i)) }
