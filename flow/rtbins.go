package flow

import (
	"sync/atomic"

	"github.com/slidegate/slidegate/internal/latbin"
	"github.com/slidegate/slidegate/internal/stripe"
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
	var counts [latbin.Bins]int64
	n, exact := b.takeInto(&counts)
	return n, meanOf(&counts, n, exact)
}

// takeInto empties the bins, adding their counts to counts, and returns
// how many response times they held and their exact sum.
func (b *rtBins) takeInto(counts *[latbin.Bins]int64) (n, exact int64) {
	for i := range b.bins {
		c := int64(b.bins[i].Swap(0))
		counts[i] += c
		n += c
	}
	b.count.Add(-n)
	return n, b.sum.Swap(0)
}

// meanOf returns the mean of n response times counted in bins counts,
// summing exact, outliers left out; 0 if n is 0.
func meanOf(counts *[latbin.Bins]int64, n, exact int64) int64 {
	if n == 0 {
		return 0
	}
	half, seen, limit := (n+1)/2, int64(0), int64(0)
	for i, c := range counts {
		if seen += c; seen >= half {
			limit = outlierFactor * latbin.Value(i)
			break
		}
	}
	var sum, kept int64
	for i, c := range counts {
		if latbin.Low(i) > limit {
			break // the rest are outliers
		}
		sum += c * latbin.Value(i)
		kept += c
	}
	if kept == n {
		return max(exact, 0) / n
	}
	return sum / kept
}

// rtStripes are a window's rtBins, one per processor once the limiter's
// requests contend (each about 1 KiB), so that two cores ending requests
// at once do not pass the same lines back and forth: the window is their
// sum.
type rtStripes struct {
	base rtBins
	set  stripe.Set[rtBins]
}

// addStriped counts response time rt in the caller's processor's bins,
// making them the first time: for a limiter whose requests contend (the
// others add to base alone).
func (s *rtStripes) addStriped(rt int64) {
	all := s.set.Stripes()
	if all == nil {
		s.set.Grow(&s.base, stripe.Count(), func() *rtBins { return new(rtBins) })
		all = s.set.Stripes()
	}
	all[stripe.Hint()&(len(all)-1)].add(rt)
}

// count returns how many response times the bins hold.
func (s *rtStripes) count() int64 {
	all := s.set.Stripes()
	if all == nil {
		return s.base.count.Load()
	}
	n := int64(0)
	for _, b := range all {
		n += b.count.Load()
	}
	return n
}

// take is rtBins.take of every processor's bins together.
func (s *rtStripes) take() (n, mean int64) {
	all := s.set.Stripes()
	if all == nil {
		return s.base.take()
	}
	var counts [latbin.Bins]int64
	var exact int64
	for _, b := range all {
		m, e := b.takeInto(&counts)
		n, exact = n+m, exact+e
	}
	return n, meanOf(&counts, n, exact)
}
