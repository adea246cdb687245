package window

import (
	"math"
	"math/bits"
	"time"
)

// Histogram bins are log-linear (HDR-style): latencies are counted in units of
// 8 ns; the first 128 units have a bin each, and every later power of two is
// split into 64 bins of equal width. A bin is thus at most 1/64 as wide as its
// lower edge, and reporting its midpoint is off by at most 1/128 (0.79%) of
// the true value, for every latency from 1 µs to the top of the range, 2^39 ns
// (9 min 10 s). Longer latencies fall in one overflow bin, reported as the
// maximum, which is kept exactly up to MaxValue nanoseconds, the same 2^39 ns.
// The bins, the maximum and the state word fill a slot of 2048 words, 16 KiB.
const (
	histUnitShift = 3 // bins count units of 2^3 ns
	histSubBits   = 6 // 64 bins per power of two
	histSub       = 1 << histSubBits
	histTopShift  = 39 - histUnitShift - histSubBits - 1 // bin shift of the highest power of two covered
	histBins      = (histTopShift+2)*histSub + 1         // regular bins and the overflow bin
	histOverflow  = histBins - 1
	histMax       = histBins // word index of the maximum latency, in nanoseconds

	// HistogramRange is the longest latency a Histogram resolves into bins;
	// longer ones are counted in an overflow bin whose quantiles report the
	// maximum.
	HistogramRange = time.Duration(1) << 39

	// HistogramBucketBytes is the memory one time bucket of a Histogram
	// takes: one 8-byte word per bin, the maximum and the bucket's state,
	// rounded up to a power of two of words.
	HistogramBucketBytes = 2048 * 8
)

var histKinds = func() []kind {
	k := make([]kind, histBins+1)
	k[histMax] = kindMax
	return k
}()

// histBin returns the bin counting latency d nanoseconds.
func histBin(d int64) int {
	if d < 0 {
		d = 0
	}
	u := uint64(d) >> histUnitShift
	shift := bits.Len64(u) - (histSubBits + 1)
	if shift <= 0 {
		return int(u)
	}
	bin := shift*histSub + int(u>>uint(shift))
	if bin >= histOverflow {
		return histOverflow
	}
	return bin
}

// histMid returns the midpoint, in nanoseconds, of the latencies bin i counts.
// i must be a regular bin, not the overflow bin.
func histMid(i int) int64 {
	shift := max(i/histSub-1, 0)
	lo := uint64(i-shift*histSub) << uint(shift) << histUnitShift
	width := uint64(1) << uint(shift) << histUnitShift
	return int64(lo + width/2)
}

// A Histogram records latencies in a ring of time-aligned buckets, one
// log-linear histogram per bucket, and answers quantiles (P50, P99, ...) and
// the maximum over the whole interval or a HistogramView of its last part.
// Quantiles are within 0.79% of the true value from 1 µs to HistogramRange
// (over nine minutes); the maximum is exact up to the same bound.
//
// Each bucket takes HistogramBucketBytes (16 KiB) of memory, allocated
// when the Histogram is made; the number of buckets is rounded up to a power
// of two. Recording allocates nothing and takes no lock. Times that go
// backwards are handled as Counter handles them.
type Histogram struct {
	r   *ring
	all HistogramView
}

// NewHistogram returns a Histogram over interval divided into buckets buckets.
// interval must be a positive whole number of nanoseconds per bucket, each at
// least MinWidth, and buckets at most MaxBuckets.
func NewHistogram(buckets int, interval time.Duration, opts ...Option) (*Histogram, error) {
	width, err := splitInterval(buckets, interval)
	if err != nil {
		return nil, err
	}
	o := buildOptions(opts)
	h := &Histogram{r: newRing(buckets, width, histKinds, o.clock)}
	h.all = HistogramView{r: h.r, k: int64(buckets)}
	return h, nil
}

// Record records latency d at the current time. A negative d counts as 0.
func (h *Histogram) Record(d time.Duration) { h.RecordAt(h.r.clock.Now(), d) }

// RecordAt records latency d at time now. It reports false if now's bucket has
// already been replaced by a later one.
func (h *Histogram) RecordAt(now int64, d time.Duration) bool {
	r := h.r
	b := r.bucketOf(now)
	s := r.slotOf(b)
	if !r.addIn(b, s, histBin(int64(d)), 1) {
		return false
	}
	return r.writeSlot(b, s, histMax, kindMax.clamp(max(int64(d), 0)))
}

// View returns a view of the last d of the interval; d must be a positive
// multiple of the bucket width and at most the interval.
func (h *Histogram) View(d time.Duration) (HistogramView, error) {
	k, err := h.r.viewBuckets(d)
	if err != nil {
		return HistogramView{}, err
	}
	return HistogramView{r: h.r, k: k}, nil
}

// Summary returns the count, maximum and main quantiles over the whole
// interval at the current time.
func (h *Histogram) Summary() Summary { return h.all.Summary() }

// SummaryAt returns the count, maximum and main quantiles over the whole
// interval at time now.
func (h *Histogram) SummaryAt(now int64) Summary { return h.all.SummaryAt(now) }

// Quantile returns the q-quantile over the whole interval at the current time.
func (h *Histogram) Quantile(q float64) time.Duration { return h.all.Quantile(q) }

// QuantileAt returns the q-quantile over the whole interval at time now.
func (h *Histogram) QuantileAt(now int64, q float64) time.Duration { return h.all.QuantileAt(now, q) }

// Late returns how many latencies were dropped because their bucket had
// already been replaced by a later one.
func (h *Histogram) Late() int64 { return h.r.late.Load() }

// A Summary describes the latencies recorded over a view.
type Summary struct {
	Count int64         // latencies recorded
	Max   time.Duration // the longest latency, exact
	P50   time.Duration // the median
	P90   time.Duration
	P99   time.Duration
	P999  time.Duration
}

// A HistogramView reads the last few buckets of a Histogram, as a View does
// for a Counter. The zero HistogramView reads as empty.
type HistogramView struct {
	r *ring
	k int64
}

// histCounts is one view's latencies merged into one histogram.
type histCounts struct {
	bins  [histBins]int64
	total int64
	max   int64
}

// merge adds up the view's buckets at time now into c, reading every word
// once, so that the quantiles computed from c agree with each other even while
// latencies are being recorded.
func (v HistogramView) merge(now int64, c *histCounts) {
	r := v.r
	c.max = MinValue
	first := r.first(now, v.k)
	for b := first; b-first < uint64(v.k); b++ {
		s := r.slotOf(b)
		if r.words[s].Load() == b<<1 {
			data := r.words[s+1 : s+1+len(histKinds)]
			for i := range c.bins {
				if w := data[i].Load(); belongs(w, b) {
					c.bins[i] += value(w)
				}
			}
			if w := data[histMax].Load(); belongs(w, b) {
				c.max = max(c.max, value(w))
			}
		}
	}
	for _, n := range c.bins {
		c.total += n
	}
	if c.total == 0 {
		c.max = 0
	}
}

// quantile returns the nearest-rank q-quantile of c: the latency of rank
// ceil(q × total), as the midpoint of its bin, never more than the maximum.
func (c *histCounts) quantile(q float64) time.Duration {
	if c.total == 0 {
		return 0
	}
	if !(q > 0) { // also catches NaN
		q = 0
	}
	rank := max(int64(math.Ceil(min(q, 1)*float64(c.total))), 1)
	var seen int64
	for i, n := range c.bins {
		seen += n
		if seen >= rank {
			if i == histOverflow {
				return time.Duration(c.max)
			}
			return time.Duration(min(histMid(i), c.max))
		}
	}
	return time.Duration(c.max)
}

// now reads the view's clock; the zero HistogramView reads 0, and its ...At
// methods return zeros.
func (v HistogramView) now() int64 {
	if v.r == nil {
		return 0
	}
	return v.r.clock.Now()
}

// Duration returns the length of the view.
func (v HistogramView) Duration() time.Duration {
	if v.r == nil {
		return 0
	}
	return time.Duration(v.k * v.r.width)
}

// Summary returns the count, maximum and main quantiles over the view at the
// current time.
func (v HistogramView) Summary() Summary { return v.SummaryAt(v.now()) }

// SummaryAt returns the count, maximum and main quantiles over the view at
// time now, all computed from one consistent read.
func (v HistogramView) SummaryAt(now int64) Summary {
	if v.r == nil {
		return Summary{}
	}
	var c histCounts
	v.merge(now, &c)
	return Summary{
		Count: c.total,
		Max:   time.Duration(c.max),
		P50:   c.quantile(0.5),
		P90:   c.quantile(0.9),
		P99:   c.quantile(0.99),
		P999:  c.quantile(0.999),
	}
}

// Quantile returns the q-quantile over the view at the current time.
func (v HistogramView) Quantile(q float64) time.Duration { return v.QuantileAt(v.now(), q) }

// QuantileAt returns the q-quantile over the view at time now, by nearest
// rank: the latency below or at which a fraction q of the recorded latencies
// lie, within 0.79%. q is clamped to [0, 1]; an empty view returns 0.
func (v HistogramView) QuantileAt(now int64, q float64) time.Duration {
	if v.r == nil {
		return 0
	}
	var c histCounts
	v.merge(now, &c)
	return c.quantile(q)
}
