package window

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/timegrid"
)

// The bounds of a ring: at most 65,536 buckets (maxBuckets), each at least
// 1 µs wide (minWidth). Times are clamped to [-maxTime, maxTime]
// nanoseconds, 2^60 ns or about 36 years either side of the clock's
// origin, so that no bucket index overflows. clock.System starts near zero
// when the process starts.
const (
	maxBuckets = timegrid.MaxBuckets
	minWidth   = timegrid.MinWidth
	maxTime    = timegrid.MaxTime
)

// A ring is the LeapArray: n slots reused in turn by time-aligned buckets of
// width w. Every bucket type (counter, rolling window, histogram) is a layout
// of words (see word.go), so one ring serves them all and no value is ever
// boxed in an interface.
//
// Buckets are numbered from a shifted origin: bucket b covers the times
// [(b-k)*w, (b-k+1)*w) for a fixed k chosen so that every accepted time has
// b > n. Bucket starts are thus multiples of w on the clock, indexes are never
// negative, and index 0, the state of a slot never written, belongs to no
// time. Bucket b lives in slot b mod n (timegrid.Slots finds it without a
// division).
//
// A slot is a state word followed by the bucket's data words. The state word
// holds b<<1 for the bucket the slot holds, with the low bit set while the
// slot is being reset for b. Invariants:
//
//   - The bucket index in a state word only grows (a writer for an older
//     bucket never takes a slot back), so a state word never repeats.
//   - Only the writer that moved the state word from an older bucket to b<<1|1
//     resets the data words, and it does so exactly once: it stores the empty
//     value with b's tag into each word, then stores b<<1.
//   - While the state word reads b<<1, every data word carries b's tag (the
//     reset tagged them, and a writer only ever writes its own tag, into a
//     word that already carries it).
//
// Writers that find the slot being reset, for their bucket or an older one,
// yield until the reset, a few stores, is done; readers never wait, and
// writers of other slots are not affected. Writers for a bucket older
// than the slot's drop their value (counted in late): that bucket has left
// every interval that later times can read. Readers take a bucket's word only
// if the state word reads b<<1 and the word carries b's tag; otherwise the
// bucket is empty to them.
type ring struct {
	grid   timegrid.Grid  // numbers the buckets: bucket b starts at grid.Start(b)
	width  int64          // bucket width in nanoseconds, grid.Width
	n      int64          // number of buckets the ring covers
	slots  timegrid.Slots // n of them
	stride int            // words per slot: the state word and the data words
	kinds  []kind
	words  []atomic.Uint64    // stripe 0 (see stripes.go)
	one    [1][]atomic.Uint64 // words alone, what stripes returns before there are more
	more   atomic.Pointer[[][]atomic.Uint64]
	late   atomic.Int64 // values dropped as late; the tests read it
	tot    *totals      // nil unless the Counter keeps totals (see totals.go)
	clock  clock.Clock
}

// newRing returns a ring of n buckets of the given width whose buckets are
// laid out as kinds, every slot empty. n buckets of the width must form a
// window that passes timegrid.CheckWindow.
func newRing(n int, width time.Duration, kinds []kind, c clock.Clock) *ring {
	r := new(ring)
	r.init(n, width, kinds, c)
	return r
}

// init makes r, which must be zero, what newRing returns: for a ring made
// in one allocation with its Counter.
func (r *ring) init(n int, width time.Duration, kinds []kind, c clock.Clock) {
	w := int64(width)
	*r = ring{
		grid:   timegrid.New(width, int64(n)),
		width:  w,
		n:      int64(n),
		slots:  timegrid.NewSlots(n),
		stride: 1 + len(kinds),
		kinds:  kinds,
		clock:  c,
	}
	// Zeroed state words hold bucket 0, which no time maps to: every slot
	// starts empty and its first writer resets it.
	r.words = make([]atomic.Uint64, n*r.stride)
	r.one[0] = r.words
}

// bucketOf returns the index of the bucket holding time t.
func (r *ring) bucketOf(t int64) uint64 { return r.grid.Index(t) }

// startOf returns the time at which bucket b starts.
func (r *ring) startOf(b uint64) int64 { return r.grid.Start(b) }

// slotOf returns the index in a stripe's words of the state word of bucket
// b's slot.
func (r *ring) slotOf(b uint64) int { return r.slots.Of(b) * r.stride }

// write combines v into data word i of the bucket holding time t. It reports
// false, and counts the value in late, when the slot already holds a later
// bucket.
func (r *ring) write(t int64, i int, v int64) bool {
	b := r.bucketOf(t)
	return r.writeSlot(r.pick(), b, r.slotOf(b), i, r.kinds[i].clamp(v))
}

// add adds v to data word i, which must be of kind kindSum, of the bucket
// holding time t, and reports as write does.
func (r *ring) add(t int64, i int, v int64) bool {
	b := r.bucketOf(t)
	return r.addIn(r.pick(), b, r.slotOf(b), i, v)
}

// addIn adds v to summed data word i of bucket b, whose slot is at s in
// stripe ws. It is write's fast path: when the slot already holds the bucket
// and the sum does not saturate, it is two loads and one CAS.
func (r *ring) addIn(ws []atomic.Uint64, b uint64, s, i int, v int64) bool {
	if ws[s].Load() == b<<1 && v >= minValue && v <= maxValue {
		w := &ws[s+1+i]
		old := w.Load()
		// With the bias (see word.go), the sum is an add on the whole word;
		// if it saturates, it changes the tag and takes the slow path.
		if nw := old + uint64(v); belongs(old, b) && belongs(nw, b) {
			if w.CompareAndSwap(old, nw) {
				return true
			}
			r.contended()
		}
	}
	return r.writeSlot(ws, b, s, i, clampValue(v))
}

// writeSlot combines v, already clamped for the kind of data word i, into
// word i of bucket b, whose slot is at s in stripe ws, following the protocol
// described on ring: it takes the slot over for b if it holds an older
// bucket, and drops v if it holds a later one.
func (r *ring) writeSlot(ws []atomic.Uint64, b uint64, s, i int, v int64) bool {
	state := &ws[s]
	word := &ws[s+1+i]
	k := r.kinds[i]
	want := b << 1
	for {
		st := state.Load()
		if st == want {
			old := word.Load()
			if !belongs(old, b) {
				// The slot moved on after we read the state; look again.
				continue
			}
			nv, changed := k.combine(value(old), v)
			if !changed || word.CompareAndSwap(old, pack(b, nv)) {
				return true
			}
			r.contended()
			continue
		}
		switch {
		case st>>1 > b:
			r.late.Add(1)
			if r.tot != nil && k == kindSum {
				r.tot.add(i, v)
			}
			return false
		case st&1 != 0:
			// A reset is in progress, for b or for an older bucket whose
			// writer must finish before the slot can move on. It is a few
			// stores; let its goroutine run.
			runtime.Gosched()
		case state.CompareAndSwap(st, want|1):
			if r.tot != nil {
				r.tot.retire(r, ws, s, st>>1, b)
			} else {
				r.reset(ws, s, b)
			}
			state.Store(want)
		}
	}
}

// first returns the oldest of the k buckets ending with the bucket holding t.
// Reads walk from it forwards: for b := first; b-first < k; b++.
func (r *ring) first(t int64, k int64) uint64 { return r.bucketOf(t) - uint64(k) + 1 }

// reset tags every data word of the slot at s in stripe ws with bucket b and
// empties it. Only the writer holding the slot's reset bit calls it.
func (r *ring) reset(ws []atomic.Uint64, s int, b uint64) {
	for i, k := range r.kinds {
		ws[s+1+i].Store(pack(b, k.empty()))
	}
}

// readStripe returns data word i of bucket b, whose slot is at s, in stripe
// ws, and whether the stripe holds bucket b there. A bucket the stripe does
// not hold (never written, being reset, or replaced by a later bucket) reads
// as absent.
func readStripe(ws []atomic.Uint64, b uint64, s, i int) (int64, bool) {
	if ws[s].Load() != b<<1 {
		return 0, false
	}
	w := ws[s+1+i].Load()
	if !belongs(w, b) {
		return 0, false
	}
	return value(w), true
}

// read returns data word i of bucket b, whose slot is at s, combined over
// the stripes as the word's kind merges values, and whether any stripe holds
// bucket b.
func (r *ring) read(b uint64, s, i int) (int64, bool) {
	acc, found := r.kinds[i].empty(), false
	for _, ws := range r.stripes() {
		if v, ok := readStripe(ws, b, s, i); ok {
			acc, found = r.kinds[i].merge(acc, v), true
		}
	}
	return acc, found
}

// fold combines word i over the k buckets ending with the bucket holding t,
// as the word's kind merges values. Buckets the ring does not hold count as
// empty.
func (r *ring) fold(t int64, i int, k int64) int64 {
	kd := r.kinds[i]
	if kd == kindSum {
		return r.sum(t, i, k)
	}
	acc := kd.empty()
	first := r.first(t, k)
	for _, ws := range r.stripes() {
		for b := first; b-first < uint64(k); b++ {
			if v, ok := readStripe(ws, b, r.slotOf(b), i); ok {
				acc = kd.merge(acc, v)
			}
		}
	}
	return acc
}

// sum adds up summed word i over the k buckets ending with the bucket holding
// t, in every stripe. It is fold for the common case, written so that the
// loop keeps the ring's fields in registers (the atomic loads stop the
// compiler from caching them) and walks the slots forwards, oldest bucket
// first.
func (r *ring) sum(t int64, i int, k int64) int64 {
	stride, top := r.stride, len(r.words)
	first := r.first(t, k)
	end := first + uint64(k)
	s0 := r.slotOf(first)
	// Add up the biased words and take the bias off once at the end: fewer
	// instructions per bucket, and no overflow (k × stripes × 2^40 < 2^63).
	var raw uint64
	var n int64
	for _, words := range r.stripes() {
		s := s0
		for b := first; b != end; b++ {
			if words[s].Load() == b<<1 {
				if w := words[s+1+i].Load(); belongs(w, b) {
					raw += w & valueMask
					n++
				}
			}
			if s += stride; s == top {
				s = 0
			}
		}
	}
	return int64(raw) - n*bias
}

// viewBuckets returns how many buckets a view of the last d covers, or an
// error if d is not a positive multiple of the width within n buckets.
func (r *ring) viewBuckets(d time.Duration, n int64) (int64, error) {
	w := time.Duration(r.width)
	if d <= 0 || d%w != 0 || int64(d/w) > n {
		return 0, &configError{Pkg: "window", Field: "view", Value: d,
			Detail: fmt.Sprintf("must be a positive multiple of the bucket width %v, at most the interval %v", w, w*time.Duration(n))}
	}
	return int64(d / w), nil
}
