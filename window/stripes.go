package window

import (
	"sync/atomic"

	"github.com/slidegate/slidegate/internal/stripe"
)

// Stripes. A ring that one core writes costs one compare-and-swap per value;
// a ring that several cores write at once costs far more, for every write
// moves the bucket's cache line from core to core, and a core that loses the
// race retries. So a ring starts with one set of words, and the first time a
// compare-and-swap on a data word fails (another core changed the word
// between the load and the swap) it adds stripes: stripe.Count() sets of
// words in all, the first being the words it had, each a whole ring of its
// own with its own state words and the protocol described on ring, on cache
// lines no other stripe touches (stripe.Words). A writer
// then writes to the stripe of the processor it runs on (stripe.Hint), so
// cores no longer share the words they write, and readers combine every
// stripe: sums add, minimums and maximums merge. Counts stay exact: each
// value is written, atomically, to exactly one stripe.
//
// Stripes are added once and kept for the ring's life. They multiply the
// ring's words by stripe.Count() (GOMAXPROCS rounded up to a power of two,
// at most stripe.Max), for the rings written from several cores at once
// only. A value written while the stripes are being added goes to the words
// it found, which stay stripe 0, so none is lost.
//
// One thing differs once a ring has stripes: a value for a time whose slot
// has moved on to a later bucket is dropped (and counted as late) only if it
// moved on in the stripe the value is written to. In another stripe the
// value may be kept, in a bucket that reads at later times never see, as
// they never see a dropped one; only a read at a time before the later
// bucket's could.

// hint picks the caller's stripe; tests replace it to spread one goroutine's
// writes over every stripe.
var hint = stripe.Hint

// stripeCount is how many stripes a structure that has found contention
// makes.
var stripeCount = stripe.Count

// pick returns the stripe the caller writes to: the ring's only words until
// it has stripes.
func (r *ring) pick() []atomic.Uint64 {
	m := r.more.Load()
	if m == nil {
		return r.words
	}
	return (*m)[hint()&(len(*m)-1)]
}

// stripes returns every stripe, for a reader to combine.
func (r *ring) stripes() [][]atomic.Uint64 {
	if m := r.more.Load(); m != nil {
		return *m
	}
	return r.one[:]
}

// contended adds the ring's stripes, once: a compare-and-swap on one of its
// words has failed.
func (r *ring) contended() {
	if r.more.Load() != nil {
		return
	}
	m := make([][]atomic.Uint64, stripeCount())
	m[0] = r.words
	for i := 1; i < len(m); i++ {
		m[i] = stripe.Words(len(r.words))
	}
	r.more.CompareAndSwap(nil, &m)
}

// striped reports whether the ring has added stripes.
func (r *ring) striped() bool { return r.more.Load() != nil }
