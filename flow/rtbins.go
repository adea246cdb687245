package flow

import (
	"sync/atomic"

	"github.com/slidegate/slidegate/internal/latbin"
)

// outlierFactor is how many times its window's median a response time
// must exceed to be an outlier: a request slow for its own reasons, not a
// sign of a queue. A queue slows most of the requests behind it, and moves
// the median with them.
const outlierFactor = 4

// rtBins counts a window's response times, exactly in sum and by the bins
// of window.Sketch (within 4.4%), so that the window's mean can leave its
// outliers out without keeping the samples: 920 bytes, three atomic adds
// per sample.
type rtBins struct {
	count, sum atomic.Int64
	bins       [latbin.Bins]atomic.Int32
}

// add counts response time rt, in nanoseconds, at least 1; one of
// latbin.Range or more counts in the last bin.
func (b *rtBins) add(rt int64) {
	b.bins[latbin.Of(min(rt, latbin.Range-1))].Add(1)
	b.sum.Add(rt)
	b.count.Add(1)
}

// take empties the bins and returns how many response times they held and
// their mean, outliers left out (0 if none): the exact mean when there are
// none, else the mean of the other samples' bins (each within 4.4%: taking
// the outliers' bins out of the exact sum would leave their error, which
// is as large as they are, in the mean). A sample added meanwhile is taken
// now or left for the next take (its count and its sum may part, by one
// sample: a window is statistics, not a promise).
func (b *rtBins) take() (n, mean int64) {
	var counts [latbin.Bins]int32
	for i := range b.bins {
		counts[i] = b.bins[i].Swap(0)
		n += int64(counts[i])
	}
	b.count.Add(-n)
	exact := b.sum.Swap(0)
	if n == 0 {
		return 0, 0
	}
	half, seen, limit := (n+1)/2, int64(0), int64(0)
	for i, c := range counts {
		if seen += int64(c); seen >= half {
			limit = outlierFactor * latbin.Value(i)
			break
		}
	}
	var sum, kept int64
	for i, c := range counts {
		if latbin.Low(i) > limit {
			break // the rest are outliers
		}
		sum += int64(c) * latbin.Value(i)
		kept += int64(c)
	}
	if kept == n {
		return n, max(exact, 0) / n
	}
	return n, sum / kept
}
