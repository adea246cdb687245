package window

import (
	"sync/atomic"
	"time"
	"unsafe"
)

// A Counter counts events (see [Event]) in a ring of time-aligned buckets.
// It takes no lock. It never loses or misplaces a count when a bucket is
// reused.
//
// The buckets have width interval/buckets, aligned to multiples of the
// width on the clock. The Counter's methods read the whole interval. That
// is the bucket holding now and the buckets-1 buckets before it, the
// newest partly elapsed. [Counter.View] returns a Counter that reads a
// shorter stretch of the same ring.
//
// Summed events ([Allowed], [Blocked], [Succeeded], [Failed], [RT],
// [Borrowed], [Slow]) are added. [MinRT] keeps the smallest value written
// in a bucket, and [MaxConcurrency] the largest. One bucket holds values
// from -2^39 to 2^39-1, about ±5.5 × 10^11, and sums saturate there. Values
// for MinRT and MaxConcurrency are clamped to lie strictly between the two
// bounds, which mark an empty bucket.
//
// The ...At methods take the time explicitly, in nanoseconds on the
// Counter's clock. A value for a time whose bucket the ring still holds is
// recorded there, even if later times have been seen. A value for a time
// whose slot a later bucket has since reused is dropped: AddAt reports
// false. No read at a later time could see it. A time far ahead
// of the others leaves every older bucket outside what reads at that time
// see. That is the same as clearing them.
//
// A Counter is safe for concurrent use. Adding and reading allocate
// nothing.
//
// The zero Counter is not usable. Make one with [NewCounter].
type Counter struct {
	r     *ring
	word  [numEvents]int8 // l.word, kept here: one load fewer on every add
	l     *layout
	k     int64      // the buckets read: the ring's n, or fewer for a view
	cache *sumsCache // nil unless made CachedSums; never on a shorter view
}

// A layout maps the events a Counter records to its data words.
type layout struct {
	word   [numEvents]int8 // the data word of each event, -1 for one not recorded
	events []Event         // the event of each data word
	kinds  []kind          // the kind of each data word
}

func newLayout(events []Event) *layout {
	l := &layout{events: events}
	for e := range l.word {
		l.word[e] = -1
	}
	for i, e := range events {
		l.word[e] = int8(i)
		l.kinds = append(l.kinds, e.kind())
	}
	return l
}

// everyEvent is the layout of a Counter that records every event.
var everyEvent = func() *layout {
	ev := make([]Event, numEvents)
	for e := range ev {
		ev[e] = Event(e)
	}
	return newLayout(ev)
}()

// NewCounter returns a Counter over interval divided into buckets buckets.
// buckets must be from 1 to 65,536. interval must divide into them in
// whole nanoseconds, at least 1 µs each. A bad argument or
// [Option] is a configuration error.
func NewCounter(buckets int, interval time.Duration, opts ...Option) (*Counter, error) {
	width, err := splitInterval(buckets, interval)
	if err != nil {
		return nil, err
	}
	o, err := buildOptions(opts, forCounter)
	if err != nil {
		return nil, err
	}
	l := everyEvent
	if o.events != nil {
		l = o.events
	}
	// The Counter, its ring and its totals or its cache in one allocation
	// (the same size class as the three apart), the ring's words, which
	// hold no pointer, in another.
	var c *Counter
	switch {
	case o.totals:
		c = newWithTotals(len(l.kinds))
	case o.cached:
		p := new(counterWithCache)
		c = &p.c
		c.r = &p.r
		c.cache = &p.cache
	default:
		c = &Counter{r: new(ring)}
	}
	tot := c.r.tot
	c.r.init(buckets, width, l.kinds, o.clock)
	c.word, c.l, c.k = l.word, l, int64(buckets)
	if o.totals {
		c.r.tot = tot
		if o.cached {
			c.cache = new(sumsCache)
		}
	}
	return c, nil
}

// counterWithTotals is a Counter with totals, its ring, and its totals'
// retired sums, one for each of its data words (an array of their number,
// A), allocated together: no more bytes than the four apart.
type counterWithTotals[A any] struct {
	c       Counter
	r       ring
	t       totals
	retired A
}

// counterWithCache is a Counter with a cache, its ring and its cache,
// allocated together: no more bytes than the three apart.
type counterWithCache struct {
	c     Counter
	r     ring
	cache sumsCache
}

// newWithTotals returns a Counter with totals of k data words, its ring
// (zero: for ring.init) and its totals made.
func newWithTotals(k int) *Counter {
	switch k {
	case 1:
		return withTotals[[1]atomic.Int64](k)
	case 2:
		return withTotals[[2]atomic.Int64](k)
	case 3:
		return withTotals[[3]atomic.Int64](k)
	case 4:
		return withTotals[[4]atomic.Int64](k)
	case 5:
		return withTotals[[5]atomic.Int64](k)
	case 6:
		return withTotals[[6]atomic.Int64](k)
	case 7:
		return withTotals[[7]atomic.Int64](k)
	case 8:
		return withTotals[[8]atomic.Int64](k)
	}
	return withTotals[[numEvents]atomic.Int64](k) // k ≤ numEvents
}

// withTotals is newWithTotals for A, an array of k atomic.Int64.
func withTotals[A any](k int) *Counter {
	p := new(counterWithTotals[A])
	p.c.r = &p.r
	p.r.tot = &p.t
	p.t.retired = unsafe.Slice((*atomic.Int64)(unsafe.Pointer(&p.retired)), k)
	return &p.c
}

// Add records v for event e at the current time. For summed events v is
// added. For [MinRT] and [MaxConcurrency] it is compared.
func (c *Counter) Add(e Event, v int64) { c.AddAt(c.r.clock.Now(), e, v) }

// AddPairAt records v1 for event e1 and v2 for event e2 at time now. It
// does what two [Counter.AddAt] calls do, but finds the bucket once. A
// request that ends records its outcome and its response time together.
// It reports whether both values were recorded.
func (c *Counter) AddPairAt(now int64, e1 Event, v1 int64, e2 Event, v2 int64) bool {
	i1, i2 := c.sumWord(e1), c.sumWord(e2)
	if i1 < 0 || i2 < 0 {
		ok1 := c.AddAt(now, e1, v1)
		return c.AddAt(now, e2, v2) && ok1
	}
	r := c.r
	ws := r.pick()
	b := r.bucketOf(now)
	s := r.slotOf(b)
	ok1 := r.addIn(ws, b, s, i1, v1)
	return r.addIn(ws, b, s, i2, v2) && ok1
}

// sumWord returns the data word of summed event e, or -1 if e is not a
// summed event the Counter records.
func (c *Counter) sumWord(e Event) int {
	if e >= MinRT {
		return -1
	}
	return int(c.word[e])
}

// AddAt records v for event e at time now. It reports false if the value
// was not recorded. That is when e is not an event the Counter records
// (see [WithEvents]), or when now's bucket has already been replaced by a
// later one.
func (c *Counter) AddAt(now int64, e Event, v int64) bool {
	if e >= numEvents {
		return false
	}
	i := int(c.word[e])
	switch {
	case i < 0:
		return false
	case e < MinRT:
		return c.r.add(now, i, v)
	}
	return c.r.write(now, i, v)
}

// Sum returns event e over the whole interval at the current time.
func (c *Counter) Sum(e Event) int64 { return c.SumAt(c.r.clock.Now(), e) }

// SumAt returns event e over the whole interval at time now. Summed events
// are added up. [MinRT] is the smallest value over the buckets, and
// [MaxConcurrency] the largest. An event with nothing recorded reads 0. It
// costs one load per bucket, or constant time with [CachedSums].
func (c *Counter) SumAt(now int64, e Event) int64 {
	if e >= numEvents || c.word[e] < 0 {
		return 0
	}
	if c.cache != nil {
		return c.SumsAt(now)[e]
	}
	return finish(e.kind(), c.r.fold(now, int(c.word[e]), c.k))
}

// finish maps the empty value of a min or max word to 0.
func finish(k kind, x int64) int64 {
	if x == k.empty() {
		return 0
	}
	return x
}

// Sums returns every event over the whole interval at the current time.
func (c *Counter) Sums() Sums { return c.SumsAt(c.r.clock.Now()) }

// SumsAt returns every event over the whole interval at time now, as
// [Counter.SumAt] does, reading each bucket once. Divide a sum by the
// interval for a rate, or [RT] by [Succeeded] for a mean response time.
func (c *Counter) SumsAt(now int64) Sums {
	s := c.cache
	if s == nil {
		return c.ringSumsAt(now)
	}
	// The cache's protocol is told on sumsCache. One function, not a call
	// to a method of the cache: a breaker reads it on every request.
	r := c.r
	b := r.bucketOf(now)
	want := b << 1
	var out Sums
	switch q := s.seq.Load(); {
	case q == want:
		for e := range out {
			out[e] = s.base[e].Load()
		}
		if s.seq.Load() != want {
			return c.ringSumsAt(now)
		}
	case q>>1 < b && q&1 == 0 && s.seq.CompareAndSwap(q, want|1):
		out = c.before(b)
		for e := range out {
			s.base[e].Store(out[e])
		}
		s.seq.Store(want)
	default:
		return c.ringSumsAt(now)
	}
	r.mergeInto(c.l, &out, b)
	for e := range out {
		out[e] = finish(Event(e).kind(), out[e])
	}
	return out
}

// ringSumsAt returns every event over the whole interval at time now, read
// from the ring.
func (c *Counter) ringSumsAt(now int64) Sums {
	var out Sums
	r := c.r
	for e := range out {
		out[e] = Event(e).kind().empty()
	}
	first := r.first(now, c.k)
	for b := first; b-first < uint64(c.k); b++ {
		r.mergeInto(c.l, &out, b)
	}
	for e := range out {
		out[e] = finish(Event(e).kind(), out[e])
	}
	return out
}

// mergeInto combines every event of bucket b, laid out as l, into out, from
// every stripe that holds b: each word is read once, and counts only if it
// carries b's tag.
func (r *ring) mergeInto(l *layout, out *Sums, b uint64) {
	s := r.slotOf(b)
	for _, ws := range r.stripes() {
		if ws[s].Load() != b<<1 {
			continue
		}
		for i, e := range l.events {
			if w := ws[s+1+i].Load(); belongs(w, b) {
				out[e] = l.kinds[i].merge(out[e], value(w))
			}
		}
	}
}

// MaxBucket returns the largest value of event e in any one bucket of the
// interval at the current time.
func (c *Counter) MaxBucket(e Event) int64 { return c.MaxBucketAt(c.r.clock.Now(), e) }

// MaxBucketAt returns the largest value of event e in any one bucket of
// the interval at time now. Buckets with nothing recorded count as 0.
func (c *Counter) MaxBucketAt(now int64, e Event) int64 {
	if e >= numEvents || c.word[e] < 0 {
		return 0
	}
	r, k, i := c.r, e.kind(), int(c.word[e])
	best := int64(0)
	first := r.first(now, c.k)
	for b := first; b-first < uint64(c.k); b++ {
		if x, ok := r.read(b, r.slotOf(b), i); ok {
			best = max(best, finish(k, x))
		}
	}
	return best
}

// View returns a Counter that reads the last d of c's interval: a view.
// It shares c's buckets, so it reads what c records, and what it records
// goes to c. d must be a positive multiple of the bucket width, at most
// c's interval. Otherwise the error is a configuration error. A 1 s view of a
// Counter over 10 s in 100 buckets reads 10 buckets, not 100. The view of
// the whole interval is c itself.
func (c *Counter) View(d time.Duration) (*Counter, error) {
	k, err := c.r.viewBuckets(d, c.k)
	switch {
	case err != nil:
		return nil, err
	case k == c.k:
		return c, nil
	}
	return &Counter{r: c.r, word: c.word, l: c.l, k: k}, nil
}

// Sums holds one value for each of the nine events, indexed by [Event].
type Sums [numEvents]int64
