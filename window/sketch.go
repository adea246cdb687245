package window

import (
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/latbin"
	"github.com/slidegate/slidegate/internal/stripe"
	"github.com/slidegate/slidegate/internal/timegrid"
)

// Sketch bins. They are those of package latbin: 8 linear bins of 256 ns
// below 2.048 µs, then 8 per power of two whose edges grow by 2^(1/8), each
// reported as its geometric midpoint, within sketchError of every latency
// in it. Latencies of sketchRange and more are counted apart and reported
// as the maximum.
//
// Bins are kept by power of two, in chunks of 8 bins for each half of the
// interval and 8 more that count since the Sketch was made (its totals, see
// SketchTotals; 192 bytes in all), and a chunk is allocated the first time
// a latency falls in it: a resource whose latencies span a few powers of
// two keeps a few chunks.
//
// docs/window.md says why the bins have this shape, and how their error
// and memory were measured.

// The range and error of a [Sketch].
const (
	sketchSub    = latbin.Sub    // bins per power of two
	sketchChunks = latbin.Powers // chunk c >= 1 holds [2^(10+c), 2^(11+c))
	sketchBins   = latbin.Bins
	sketchLinear = latbin.Linear // latencies below 2^11 ns are binned linearly, in chunk 0

	// sketchRange is the first latency a Sketch does not bin: 2^38 ns, about
	// 4 min 35 s. Longer ones are counted and reported as the maximum.
	sketchRange = time.Duration(latbin.Range)

	// sketchError is the largest relative error of a Sketch's quantiles for
	// latencies from 2.048 µs to sketchRange: 2^(1/16) - 1, about 4.43%.
	// Below 2.048 µs they are within 128 ns.
	sketchError = latbin.Error
)

// sketchBin returns the chunk and the bin within it of latency d in [0,
// sketchRange).
func sketchBin(d int64) (chunk, bin int) {
	i := latbin.Of(d)
	return i / sketchSub, i % sketchSub
}

// sketchValue returns the latency reported for bin j of chunk c.
func sketchValue(c, j int) int64 { return latbin.Value(c*sketchSub + j) }

// A Sketch records latencies over a sliding interval kept in two halves.
// It answers the exact maximum, and quantiles (P50, P99, ...) within
// 4.43%. Both cover the half in progress and the one before it:
// the last half to whole interval. It also counts every latency by bin
// since it was made ([Sketch.TotalsInto]), for histograms that add up
// across processes.
//
// A Sketch is the latency summary to keep for many things at once, such as
// one per resource. It starts at about 510 bytes with one latency. It grows
// by 192 bytes for each further power of two its latencies reach, up to
// 5.6 KiB. Latencies from 1 µs to 1 s, 20 powers of two, take 3.9 KiB. A
// [Histogram] of the same interval in four buckets takes 13 KiB, even when
// [Compact].
//
// A writer delayed across a whole interval cannot count in a later half.
// Reads never mistake an earlier half's value for the current one's. Under
// contention a Sketch adds stripes, as a [Counter] does, and readers
// combine them.
//
// A Sketch is safe for concurrent use. Recording allocates nothing, except
// the first time a latency falls in a power of two. Reading allocates
// nothing. The zero Sketch is not usable. Make one with [NewSketch].
type Sketch struct {
	grid  timegrid.Grid
	clock clock.Clock
	base  sketchStripe
	more  stripe.Set[sketchStripe] // every stripe, base first, once contended
	late  atomic.Int64             // latencies dropped as late; the tests read it
}

// A sketchStripe holds the two halves of one stripe: for each, its state
// word (as a ring slot's), its maximum (kindMax), its count of latencies
// beyond sketchRange, and its bins, in chunks; and the stripe's totals: its
// count of latencies beyond sketchRange since it was made, and, in the
// chunks, its count of each bin's.
//
// Each half is a bucket as in a Counter, and each word carries the tag of
// its bucket (see word.go), so that a writer delayed across a whole interval
// cannot count in a later half, and reads never mistake an earlier half's
// value for the current one's: the protocol described on ring, with the
// words of a half spread over its bin chunks. One difference: a chunk
// allocated while a half was being reset may keep words of an earlier
// bucket, all zero; a writer of the current bucket, finding such a word
// while the state word still holds its bucket, takes it as empty.
//
// A Sketch adds stripes under contention as a Counter does (see
// stripes.go): each stripe a sketchStripe of its own, combined by readers.
type sketchStripe struct {
	state     [2]atomic.Uint64
	max       [2]atomic.Uint64
	over      [2]atomic.Uint64
	overTotal atomic.Uint64
	chunks    [sketchChunks]atomic.Pointer[sketchChunk]
}

// A paddedSketchStripe is a stripe made under contention, 384 bytes: a size
// the allocator aligns to 128, so that no two stripes share a cache line.
type paddedSketchStripe struct {
	sketchStripe
	_ [384 - unsafe.Sizeof(sketchStripe{})]byte
}

// A sketchChunk holds the 8 bins of one power of two for both halves, half
// h's bins in words [h*8, h*8+8), and their totals since the Sketch was
// made in words [16, 24). A total is a plain count, without a tag: no
// reset ever touches it.
type sketchChunk [3 * sketchSub]atomic.Uint64

// sketchTotal is the first word of a chunk's totals.
const sketchTotal = 2 * sketchSub

// NewSketch returns a Sketch over interval, kept in two halves. The
// interval must divide into two halves of whole nanoseconds, each at least
// 1 µs. The only [Option] is [WithClock]. A bad argument or Option is a
// configuration error.
func NewSketch(interval time.Duration, opts ...Option) (*Sketch, error) {
	width, err := splitInterval(2, interval)
	if err != nil {
		return nil, err
	}
	o, err := buildOptions(opts, forSketch)
	if err != nil {
		return nil, err
	}
	return &Sketch{grid: timegrid.New(width, 2), clock: o.clock}, nil
}

// Record records latency d at the current time. A negative d counts as 0.
func (k *Sketch) Record(d time.Duration) { k.RecordAt(k.clock.Now(), d) }

// RecordAt records latency d at time now. It reports false if the half
// holding now has already been replaced by a later one. The latency is
// counted in the totals ([Sketch.TotalsInto]) all the same.
func (k *Sketch) RecordAt(now int64, d time.Duration) bool { return k.RecordBatchAt(now, d, 1) }

// RecordBatchAt records latency d at time now for a batch of n operations
// that took d together. An n below 1 counts as 1. The latency counts once
// in the window, for the batch was one wait. It counts n times in the
// totals ([Sketch.TotalsInto]), so that these agree with a count and a sum
// of the operations. It reports false as [Sketch.RecordAt] does.
func (k *Sketch) RecordBatchAt(now int64, d time.Duration, n int64) bool {
	st := k.pick()
	b := k.grid.Index(now)
	h := int(b & 1)
	ns := max(int64(d), 0)
	var word *atomic.Uint64
	if ns >= int64(sketchRange) {
		word = &st.over[h]
		st.overTotal.Add(uint64(max(n, 1)))
	} else {
		c, j := sketchBin(ns)
		p := st.chunks[c].Load()
		if p == nil {
			p = st.chunk(c)
		}
		word = &p[h*sketchSub+j]
		// The one write the totals cost: the bin found, the chunk loaded,
		// the word on the stripe the window writes.
		p[sketchTotal+j].Add(uint64(max(n, 1)))
	}
	// The fast path of count and raise, written out: the half holds b, the
	// bin's word carries b's tag and is counted, and the maximum, read
	// after the half is seen to hold b still, is not below ns. Anything
	// else takes them.
	state, want := &st.state[h], b<<1
	if state.Load() == want {
		if old := word.Load(); belongs(old, b) && value(old) < maxValue && word.CompareAndSwap(old, old+1) {
			if state.Load() == want {
				if m := st.max[h].Load(); belongs(m, b) && value(m) >= ns {
					return true
				}
			}
			return k.raise(st, b, kindMax.clamp(ns))
		}
	}
	if !k.count(st, b, word) {
		return false
	}
	return k.raise(st, b, kindMax.clamp(ns))
}

// chunk returns chunk c of the stripe, allocating it if need be. A new
// chunk's words carry, with the value 0, the bucket each half's state word
// holds, or is being reset for: empty for that bucket, and for any later one
// (see Sketch).
func (st *sketchStripe) chunk(c int) *sketchChunk {
	if p := st.chunks[c].Load(); p != nil {
		return p
	}
	p := new(sketchChunk)
	for h := range 2 {
		w := pack(st.state[h].Load()>>1, 0)
		for j := range sketchSub {
			p[h*sketchSub+j].Store(w)
		}
	}
	if st.chunks[c].CompareAndSwap(nil, p) {
		return p
	}
	return st.chunks[c].Load()
}

// count adds one to word, of bucket b, taking the half over for b first if
// it holds an older bucket. It reports false if the half holds a later one.
func (k *Sketch) count(st *sketchStripe, b uint64, word *atomic.Uint64) bool {
	state := &st.state[b&1]
	want := b << 1
	for {
		sv := state.Load()
		if sv == want {
			old := word.Load()
			switch {
			case belongs(old, b):
				if value(old) >= maxValue || word.CompareAndSwap(old, old+1) {
					return true // saturated, or counted
				}
				k.contended()
			case state.Load() == want:
				// A word of an older bucket while the half holds b: one of
				// a chunk the reset did not reach. Empty for b.
				if word.CompareAndSwap(old, pack(b, 1)) {
					return true
				}
			}
			continue
		}
		switch {
		case sv>>1 > b:
			k.late.Add(1)
			return false
		case sv&1 != 0:
			runtime.Gosched() // a reset, a few stores away
		case state.CompareAndSwap(sv, want|1):
			st.reset(int(b&1), b)
			state.Store(want)
		}
	}
}

// raise makes v the maximum of bucket b's half if it is larger. It reports
// false if the half has moved on.
func (k *Sketch) raise(st *sketchStripe, b uint64, v int64) bool {
	word := &st.max[b&1]
	for {
		if st.state[b&1].Load() != b<<1 {
			return false
		}
		old := word.Load()
		if !belongs(old, b) {
			return false
		}
		if value(old) >= v || word.CompareAndSwap(old, pack(b, v)) {
			return true
		}
		k.contended()
	}
}

// reset empties half h of the stripe for bucket b: its maximum, its count of
// long latencies and every bin of every chunk allocated. Only the writer
// holding the half's reset bit calls it.
func (st *sketchStripe) reset(h int, b uint64) {
	st.max[h].Store(pack(b, kindMax.empty()))
	st.over[h].Store(pack(b, 0))
	zero := pack(b, 0)
	for c := range st.chunks {
		if p := st.chunks[c].Load(); p != nil {
			for j := range sketchSub {
				p[h*sketchSub+j].Store(zero)
			}
		}
	}
}

// pick returns the stripe the caller writes to.
func (k *Sketch) pick() *sketchStripe { return k.more.Pick(&k.base, hint) }

// contended adds the Sketch's stripes, once: a compare-and-swap on one of
// its words has failed.
func (k *Sketch) contended() {
	k.more.Grow(&k.base, stripeCount(), func() *sketchStripe { return &new(paddedSketchStripe).sketchStripe })
}

// Summary returns the count, maximum and main quantiles of the latencies
// recorded in the last half to whole interval, at the current time.
func (k *Sketch) Summary() Summary { return k.SummaryAt(k.clock.Now()) }

// SummaryAt returns the count, maximum and main quantiles of the latencies
// recorded in the half holding now and the one before it, all computed from
// one read of the bins.
func (k *Sketch) SummaryAt(now int64) Summary {
	var c sketchCounts
	k.merge(now, &c)
	return summarize(c.total, c.max, c.quantile)
}

// Quantile returns the q-quantile at the current time. See
// [Sketch.QuantileAt].
func (k *Sketch) Quantile(q float64) time.Duration { return k.QuantileAt(k.clock.Now(), q) }

// QuantileAt returns the q-quantile of the latencies recorded in the half
// holding now and the one before it, by nearest rank. It is within 4.43%,
// or 128 ns below 2.048 µs, and never above the maximum. Latencies of 2^38
// ns (about 4 min 35 s) and more report the maximum. q is clamped to [0,
// 1]. With nothing recorded it returns 0.
func (k *Sketch) QuantileAt(now int64, q float64) time.Duration {
	var c sketchCounts
	k.merge(now, &c)
	return c.quantile(q)
}

// sketchCounts are the bins of the two halves read, every stripe combined.
type sketchCounts struct {
	bins  [sketchBins]int64
	over  int64
	total int64
	max   int64
}

// merge adds up the halves of the buckets holding now and the one before it
// into c.
func (k *Sketch) merge(now int64, c *sketchCounts) {
	c.max = minValue
	b := k.grid.Index(now)
	if m := k.more.Stripes(); m != nil {
		for _, st := range m {
			st.mergeInto(c, b)
		}
	} else {
		k.base.mergeInto(c, b)
	}
	top := int64(0) // the reported latency of the highest bin counted
	for i, n := range c.bins {
		if n != 0 {
			c.total += n
			top = sketchValue(i/sketchSub, i%sketchSub)
		}
	}
	if c.over != 0 {
		c.total += c.over
		top = int64(sketchRange)
	}
	if c.max == minValue {
		// Nothing recorded; or a latency counted in a half whose maximum its
		// writer has not yet raised, which the highest bin stands for.
		c.max = top
	}
}

// mergeInto adds the stripe's halves of buckets b-1 and b into c, each word
// counted only if its half holds that bucket and it carries the bucket's tag.
func (st *sketchStripe) mergeInto(c *sketchCounts, b uint64) {
	for x := b - 1; x <= b; x++ {
		h := int(x & 1)
		if st.state[h].Load() != x<<1 {
			continue
		}
		if w := st.max[h].Load(); belongs(w, x) {
			c.max = max(c.max, value(w))
		}
		if w := st.over[h].Load(); belongs(w, x) {
			c.over += value(w)
		}
		for ci := range st.chunks {
			p := st.chunks[ci].Load()
			if p == nil {
				continue
			}
			for j := range sketchSub {
				if w := p[h*sketchSub+j].Load(); belongs(w, x) {
					c.bins[ci*sketchSub+j] += value(w)
				}
			}
		}
	}
}

// quantile returns the nearest-rank q-quantile of c: the reported latency
// of the bin holding the latency of rank ceil(q × total), never more than the
// maximum.
func (c *sketchCounts) quantile(q float64) time.Duration {
	if c.total == 0 {
		return 0
	}
	rank := rankOf(q, c.total)
	var seen int64
	for i, n := range c.bins {
		if seen += n; seen >= rank {
			return time.Duration(min(sketchValue(i/sketchSub, i%sketchSub), c.max))
		}
	}
	return time.Duration(c.max) // beyond sketchRange
}
