package window

import (
	"fmt"
	"github.com/slidegate/slidegate/internal/latbin"
	"math"
	"time"
)

// SketchBins is how many bins a Sketch has below SketchRange: 8 linear bins
// of 256 ns below 2.048 µs, then 8 for each power of two of nanoseconds up
// to SketchRange (2^11 to 2^38 ns).
const SketchBins = sketchBins

// SketchTotals are the latencies a Sketch recorded since it was made, by
// bin: the counts a histogram exports, for they only grow and add up across
// processes, where quantiles do not. Bin i holds the latencies from
// SketchBinLow(i) up to, not including, SketchBinLow(i+1) (SketchRange for
// the last); SketchBinValue(i) is the latency the Sketch reports for it,
// within SketchError of every latency in the bin (128 ns below 2.048 µs).
//
// A SketchTotals is 1.8 KB: keep one and fill it again (TotalsInto) rather
// than making one per read.
type SketchTotals struct {
	// Bins[i] counts the latencies recorded in bin i.
	Bins [SketchBins]int64
	// Over counts the latencies of SketchRange and more, which no bin
	// holds.
	Over int64
}

// Count returns how many latencies t counts: its bins and Over, saturating
// at math.MaxInt64.
func (t *SketchTotals) Count() int64 {
	n := t.Over
	for _, b := range t.Bins {
		if n += b; n < 0 {
			return math.MaxInt64
		}
	}
	return n
}

// TotalsInto sets t to the latencies recorded since the Sketch was made,
// every stripe added up: a batch (RecordBatchAt) counts as its operations.
// Each count is read on its own while writers go on, so t may hold a
// latency recorded during the read in one bin and not another latency
// recorded before it; no count is ever read lower than an earlier read of
// it. A count saturates at math.MaxInt64. TotalsInto allocates nothing.
func (k *Sketch) TotalsInto(t *SketchTotals) {
	*t = SketchTotals{}
	if m := k.more.Stripes(); m != nil {
		for _, st := range m {
			st.totalsInto(t)
		}
	} else {
		k.base.totalsInto(t)
	}
}

// totalsInto adds the stripe's totals to t.
func (st *sketchStripe) totalsInto(t *SketchTotals) {
	t.Over = addCount(t.Over, st.overTotal.Load())
	for c := range st.chunks {
		p := st.chunks[c].Load()
		if p == nil {
			continue
		}
		for j := range sketchSub {
			i := c*sketchSub + j
			t.Bins[i] = addCount(t.Bins[i], p[sketchTotal+j].Load())
		}
	}
}

// addCount adds the count v of a total word to n, saturating at
// math.MaxInt64.
func addCount(n int64, v uint64) int64 {
	if v > math.MaxInt64 || n+int64(v) < 0 {
		return math.MaxInt64
	}
	return n + int64(v)
}

// SketchBinLow returns the lowest latency bin i holds, exactly: 256·i ns
// for the 8 linear bins below 2.048 µs; above, for bin j of the power of
// two [2^e, 2^(e+1)) ns, the lowest latency whose 10 bits below the
// leading one the Sketch's table puts in bin j, which is 2^e·2^(j/8)
// rounded up to a multiple of 2^(e-10), at most 0.1% above it. i =
// SketchBins returns SketchRange. It panics if i is out of [0, SketchBins].
func SketchBinLow(i int) time.Duration {
	if i < 0 || i > SketchBins {
		panic("window: SketchBinLow: bin out of range")
	}
	if i == SketchBins {
		return SketchRange
	}
	return time.Duration(latbin.Low(i))
}

// SketchBinValue returns the latency a Sketch reports for bin i: the
// midpoint of a linear bin, the geometric midpoint 2^e·2^((j+0.5)/8) of
// bin j of a power of two 2^e. It panics if i is out of [0, SketchBins).
func SketchBinValue(i int) time.Duration {
	if i < 0 || i >= SketchBins {
		panic("window: SketchBinValue: bin out of range")
	}
	return time.Duration(sketchValue(i/sketchSub, i%sketchSub))
}

// CheckBounds checks bounds, the upper bounds of the buckets of a histogram
// made from a Sketch's bins (SketchTotals): at most most of them, each
// above zero and below SketchRange, and each above the one before. It
// returns an error naming the first that is not ("buckets[2] = 0s: a bound
// must be above zero"), or nil.
func CheckBounds(bounds []time.Duration, most int) error {
	if len(bounds) > most {
		return fmt.Errorf("buckets: %d bounds, more than the %d a histogram takes", len(bounds), most)
	}
	for i, b := range bounds {
		switch {
		case b <= 0:
			return fmt.Errorf("buckets[%d] = %v: a bound must be above zero", i, b)
		case b >= SketchRange:
			return fmt.Errorf("buckets[%d] = %v: a bound must be below %v, the longest response time the guard bins", i, b, SketchRange)
		case i > 0 && b <= bounds[i-1]:
			return fmt.Errorf("buckets[%d] = %v: a bound must be above the one before, %v", i, b, bounds[i-1])
		}
	}
	return nil
}
