package window

import "math"

// SketchTotals are the latencies a [Sketch] recorded since it was made, by
// bin. They are the counts a histogram exports. They only grow, and they
// add up across processes, where quantiles do not. There are 224 bins. The
// first 8 are linear, 256 ns wide, below 2.048 µs. Then come 8 for each
// power of two, from 2^11 ns up to 2^38 ns, about 4 min 35 s. A bin's
// edges grow by 2^(1/8). A Sketch reports each bin's latencies within
// 4.43%, or 128 ns below 2.048 µs.
//
// A SketchTotals is 1.8 KB. Keep one and fill it again
// ([Sketch.TotalsInto]) rather than making one per read.
type SketchTotals struct {
	// Bins[i] counts the latencies recorded in bin i.
	Bins [sketchBins]int64
	// Over counts the latencies of 2^38 ns and more, which no bin holds.
	Over int64
}

// Count returns how many latencies t counts, its bins and Over. It
// saturates at [math.MaxInt64].
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
// every stripe added up. A batch ([Sketch.RecordBatchAt]) counts as its
// operations. Each count is read on its own while writers go on. So t may
// hold a latency recorded during the read in one bin, and miss another
// latency recorded before it in another bin. No count is ever read lower
// than an earlier read of it. A count saturates at [math.MaxInt64].
// TotalsInto allocates nothing.
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
