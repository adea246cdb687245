package window

import (
	"math"
	"math/bits"
	"time"
)

// Histogram bins are log-linear (HDR-style): latencies are counted in units of
// 2^unit ns; the first 2^(sub+1) units have a bin each, and every later power
// of two is split into 2^sub bins of equal width. A bin is thus at most 2^-sub
// as wide as its lower edge, and reporting its midpoint is off by at most
// 2^-(sub+1) of the true value above the linear range, and by at most half a
// unit within it, up to the top of the range, 2^39 ns (9 min 10 s). Longer
// latencies fall in one overflow bin, reported as the maximum, which is kept
// exactly up to maxValue nanoseconds, the same 2^39 ns.
//
// The default layout counts units of 8 ns in 64 bins per power of two: within
// 1/128 (0.79%) from 1 µs up. Its 1,985 bins, the maximum and the state word
// take 15,896 bytes per bucket. The compact one (Compact) counts units of
// 1.024 µs in 16 bins per power of two: within 1/32 (3.2%) from 16 µs up and
// 0.52 µs below, in 417 bins, 3,352 bytes per bucket.
type histLayout struct {
	unit     uint // bins count units of 2^unit ns
	sub      uint // 2^sub bins per power of two
	bins     int  // regular bins and the overflow bin
	overflow int  // the overflow bin
	max      int  // word index of the maximum latency, in nanoseconds
	kinds    []kind
}

func newHistLayout(unit, sub uint) *histLayout {
	top := 39 - int(unit) - int(sub) - 1 // bin shift of the highest power of two covered
	bins := (top+2)<<sub + 1
	l := &histLayout{unit: unit, sub: sub, bins: bins, overflow: bins - 1, max: bins}
	l.kinds = make([]kind, bins+1)
	l.kinds[l.max] = kindMax
	return l
}

var (
	fineBins    = newHistLayout(3, 6)
	compactBins = newHistLayout(10, 4)
)

const (
	// histogramRange is the longest latency a Histogram resolves into bins,
	// 2^39 ns. Longer ones are counted in an overflow bin, whose quantiles
	// report the maximum.
	histogramRange = time.Duration(1) << 39

	// histogramBucketBytes is the memory one time bucket of a Histogram
	// takes: one 8-byte word per bin (1,985 of them), the maximum and the
	// bucket's state. A Compact histogram's bucket takes
	// compactBucketBytes: 417 bins, the maximum and the state.
	histogramBucketBytes = (1985 + 2) * 8
	compactBucketBytes   = (417 + 2) * 8

	maxBins = 2048 // more than any layout's bins
)

// bin returns the bin counting latency d nanoseconds.
func (l *histLayout) bin(d int64) int {
	if d < 0 {
		d = 0
	}
	u := uint64(d) >> l.unit
	shift := bits.Len64(u) - int(l.sub+1)
	if shift <= 0 {
		return int(u)
	}
	bin := shift<<l.sub + int(u>>uint(shift))
	if bin >= l.overflow {
		return l.overflow
	}
	return bin
}

// mid returns the midpoint, in nanoseconds, of the latencies bin i counts.
// i must be a regular bin, not the overflow bin.
func (l *histLayout) mid(i int) int64 {
	shift := max(i>>l.sub-1, 0)
	lo := uint64(i-shift<<l.sub) << uint(shift) << l.unit
	width := uint64(1) << uint(shift) << l.unit
	return int64(lo + width/2)
}

// A Histogram records latencies in a ring of time-aligned buckets, one
// log-linear histogram per bucket. It answers quantiles (P50, P99, ...) and
// the maximum over the whole interval. [Histogram.View] returns a Histogram
// that reads its last part. Quantiles are within 0.79% of the true value from 1 µs to
// 2^39 ns, over nine minutes. The maximum is exact up to the same bound.
//
// Each bucket takes 15,896 bytes of memory, about 16 KiB. With [Compact] it
// takes 3,352 bytes, about 3 KiB. The memory is
// allocated when the Histogram is made. Recording allocates nothing and
// takes no lock. Times that go backwards are handled as a [Counter] handles
// them. A Histogram is safe for concurrent use.
//
// The zero Histogram is not usable. Make one with [NewHistogram].
type Histogram struct {
	r *ring
	l *histLayout
	k int64 // the buckets read: the ring's n, or fewer for a view
}

// NewHistogram returns a Histogram over interval divided into buckets
// buckets. buckets must be from 1 to 65,536. interval must divide into them in
// whole nanoseconds, at least 1 µs each. A bad argument
// or [Option] is a configuration error.
func NewHistogram(buckets int, interval time.Duration, opts ...Option) (*Histogram, error) {
	width, err := splitInterval(buckets, interval)
	if err != nil {
		return nil, err
	}
	o, err := buildOptions(opts, forHistogram)
	if err != nil {
		return nil, err
	}
	l := fineBins
	if o.compact {
		l = compactBins
	}
	return &Histogram{r: newRing(buckets, width, l.kinds, o.clock), l: l, k: int64(buckets)}, nil
}

// Compact makes a [Histogram] count latencies in coarser bins. Its
// quantiles are within 3.2% from 16 µs up, and within 0.52 µs below. A
// bucket takes 3,352 bytes, about 3 KiB, instead of 15,896 bytes,
// about 16 KiB. It suits many histograms, such as
// one per resource. It applies to a Histogram only.
func Compact() Option {
	return func(o *options) { o.compact = true }
}

// Record records latency d at the current time. A negative d counts as 0.
func (h *Histogram) Record(d time.Duration) { h.RecordAt(h.r.clock.Now(), d) }

// RecordAt records latency d at time now. It reports false if now's bucket has
// already been replaced by a later one.
func (h *Histogram) RecordAt(now int64, d time.Duration) bool {
	r := h.r
	ws := r.pick()
	b := r.bucketOf(now)
	s := r.slotOf(b)
	if !r.addIn(ws, b, s, h.l.bin(int64(d)), 1) {
		return false
	}
	return r.writeSlot(ws, b, s, h.l.max, kindMax.clamp(max(int64(d), 0)))
}

// View returns a Histogram that reads the last d of h's interval: a view.
// It shares h's buckets, so it reads what h records, and what it records
// goes to h. d must be a positive multiple of the bucket width, at most h's
// interval. Otherwise the error is a configuration error. The view of the whole
// interval is h itself.
func (h *Histogram) View(d time.Duration) (*Histogram, error) {
	k, err := h.r.viewBuckets(d, h.k)
	switch {
	case err != nil:
		return nil, err
	case k == h.k:
		return h, nil
	}
	return &Histogram{r: h.r, l: h.l, k: k}, nil
}

// A Summary describes the latencies a [Histogram] or a [Sketch] holds.
type Summary struct {
	Count int64         // latencies recorded
	Max   time.Duration // the longest latency, exact
	P50   time.Duration // the median
	P90   time.Duration
	P99   time.Duration
	P999  time.Duration
}

// histCounts is one view's latencies merged into one histogram.
type histCounts struct {
	l     *histLayout
	bins  [maxBins]int64 // the first l.bins are used
	total int64
	max   int64
}

// merge adds up the histogram's buckets at time now into c, reading every word
// once, so that the quantiles computed from c agree with each other even while
// latencies are being recorded.
func (h *Histogram) merge(now int64, c *histCounts) {
	r, l, k := h.r, h.l, h.k
	c.l, c.max = l, minValue
	bins := c.bins[:l.bins]
	var total int64 // counted as the bins are, not in a walk of its own
	first := r.first(now, k)
	for _, ws := range r.stripes() {
		for b := first; b-first < uint64(k); b++ {
			s := r.slotOf(b)
			if ws[s].Load() == b<<1 {
				data := ws[s+1 : s+1+len(l.kinds)]
				for i := range bins {
					if w := data[i].Load(); belongs(w, b) {
						v := value(w)
						bins[i] += v
						total += v
					}
				}
				if w := data[l.max].Load(); belongs(w, b) {
					c.max = max(c.max, value(w))
				}
			}
		}
	}
	c.total = total
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
	rank := rankOf(q, c.total)
	var seen int64
	for i, n := range c.bins[:c.l.bins] {
		seen += n
		if seen >= rank {
			if i == c.l.overflow {
				return time.Duration(c.max)
			}
			return time.Duration(min(c.l.mid(i), c.max))
		}
	}
	return time.Duration(c.max)
}

// Summary returns the count, maximum and main quantiles over the whole
// interval at the current time.
func (h *Histogram) Summary() Summary { return h.SummaryAt(h.r.clock.Now()) }

// SummaryAt returns the count, maximum and main quantiles over the whole
// interval at time now, all computed from one consistent read.
func (h *Histogram) SummaryAt(now int64) Summary {
	var c histCounts
	h.merge(now, &c)
	return c.summary()
}

// summaryQuantiles are the quantiles a Summary holds, in increasing order.
var summaryQuantiles = [4]float64{0.5, 0.9, 0.99, 0.999}

// summary returns the Summary of c: what summarize returns with
// c.quantile, found in one walk of the bins instead of one per quantile.
func (c *histCounts) summary() Summary {
	var q [len(summaryQuantiles)]time.Duration
	j := 0
	if c.total != 0 {
		rank := rankOf(summaryQuantiles[0], c.total)
		var seen int64
	walk:
		for i, n := range c.bins[:c.l.bins] {
			seen += n
			for seen >= rank {
				if i == c.l.overflow {
					break walk
				}
				q[j] = time.Duration(min(c.l.mid(i), c.max))
				if j++; j == len(q) {
					break walk
				}
				rank = rankOf(summaryQuantiles[j], c.total)
			}
		}
		for ; j < len(q); j++ {
			q[j] = time.Duration(c.max)
		}
	}
	return Summary{Count: c.total, Max: time.Duration(c.max), P50: q[0], P90: q[1], P99: q[2], P999: q[3]}
}

// summarize returns the Summary of total latencies of maximum max whose
// quantiles quantile answers.
func summarize(total, max int64, quantile func(float64) time.Duration) Summary {
	return Summary{
		Count: total,
		Max:   time.Duration(max),
		P50:   quantile(0.5),
		P90:   quantile(0.9),
		P99:   quantile(0.99),
		P999:  quantile(0.999),
	}
}

// rankOf returns the rank of the nearest-rank q-quantile of total > 0
// values: ceil(q × total), at least 1, with q clamped to [0, 1] (NaN as 0).
func rankOf(q float64, total int64) int64 {
	if !(q > 0) { // also catches NaN
		q = 0
	}
	return max(int64(math.Ceil(min(q, 1)*float64(total))), 1)
}

// Quantile returns the q-quantile over the whole interval at the current
// time.
func (h *Histogram) Quantile(q float64) time.Duration { return h.QuantileAt(h.r.clock.Now(), q) }

// QuantileAt returns the q-quantile over the whole interval at time now, by
// nearest rank. That is the latency at or below which a fraction q of the
// recorded latencies lie. It is within 0.79% of the true value, or 3.2%
// with [Compact]. q is clamped to [0, 1]. With nothing recorded it returns
// 0.
func (h *Histogram) QuantileAt(now int64, q float64) time.Duration {
	var c histCounts
	h.merge(now, &c)
	return c.quantile(q)
}
