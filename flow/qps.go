package flow

import (
	"math"
	"math/bits"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/flowlimits"
	"github.com/slidegate/slidegate/internal/timegrid"
)

// maxLimit is the largest limit a limiter of this package takes, 2^32-1:
// the most a count word holds.
const maxLimit = flowlimits.MaxLimit

var _ [maxLimit - (1<<countBits - 1)]struct{} // the count words hold maxLimit

// How a QPS limiter keeps its promise.
//
// The interval is divided into k buckets. An interval of the limiter's
// length touches at most k+1 of them, so a request is allowed only if the
// bucket it falls in and the k buckets before it hold, with it, no more than
// the limit. Counting the oldest bucket whole, although part of it has left
// the interval, costs throughput: k/(k+1) of the limit under steady
// overload. Finer buckets raise that at 8 bytes each (the limiter keeps the
// next power of two above k+1 of them); deciding costs the same.
//
// Only the newest bucket allows requests. Opening a bucket seals the one
// before it, so the sum over the k buckets before the open one, its base, is
// fixed when the bucket opens, and deciding is a single compare-and-swap on
// the open bucket's count against limit - base. A caller whose time falls in
// an older bucket than the open one (it read the clock, then lost the race
// to a caller with a later time) is counted in the open bucket: the
// guarantee holds for the times at which the limiter counts requests, which
// never go backwards.
//
// Under contention that one word would be a cache line every core fights
// over. So the first time two callers collide on it, the limiter gives each
// processor a lease cell: a request that finds room takes, with the places
// it needs, a few more for its processor's cell (fewer as the window fills,
// none near the limit), and the next requests on that processor take their
// places from the cell, writing nothing shared. Leased places count as
// allowed in the bucket from the moment they are leased, so the guarantee
// holds as before; the places a cell still holds when its bucket closes are
// given back. Striping costs 64 bytes per cell, one cell per processor
// (GOMAXPROCS rounded up to a power of two, from 2 to 64), and 48 bytes to
// find them, allocated the first time callers collide; a pass over the cells
// each time a bucket opens; near the limit, a request may be blocked while
// another processor's cell still holds a few of the bucket's places (each
// lease is at most 1/(2 × cells) of the room left when it is taken, and at
// most 256 places), which come back when the bucket closes; and RetryAfter,
// which counts leased places as allowed, may name a time a bucket later than
// a retry would fit.
//
// With a warm-up each bucket's limit is fixed when it opens, from the
// coldness the buckets before it left, so the guarantee holds for it.
//
// A limiter takes no lock, with one exception: while a bucket opens, once
// per bucket width, callers wait for the caller opening it (a sum of at most
// k counts and a few stores, and, once it stripes, a pass over the cells that
// waits for a caller midway through taking a lease, two compare-and-swaps
// from done) rather than decide against a bucket half written.
//
// Inside, a limiter keeps one count word per slot, and one word each for
// what belongs to the open bucket alone: its base, its lending word (see
// borrow) and, with warm-up, its limit and coldness. A caller reads the open
// bucket's count word and then the others; they are stored before the count
// word is published, and a later bucket stores its own only after sealing
// that count word, so a caller that read a later bucket's base or limit finds
// its compare-and-swap failing and decides again.

// A QPS limiter allows at most its limit of requests in every interval of
// its length. That holds wherever the interval starts, not only where its
// buckets start. With 100 a second, no second of the limiter's time holds
// more than 100 allowed requests.
//
// A request is allowed only if its bucket and the k buckets before it
// hold at most the limit with it. So under steady overload the limiter
// allows k/(k+1) of its limit: 96% with the default 25 buckets.
//
// With a warm-up ([QPSSettings.WarmUp]) the limit starts at Limit divided
// by ColdFactor. It rises as traffic uses the limiter, reaching the full
// limit after the warm-up period of steady overload. Room left unused
// cools it again: an idle limiter is fully cold after the period. The
// limit in force never exceeds Limit, and holds for every interval.
//
// [QPS.AllowPriority] lets a request borrow a place in the next bucket
// when the window is full; the guarantee holds with it.
//
// A QPS limiter is safe for concurrent use, and deciding allocates
// nothing. It takes 400 bytes with 25 buckets, 128 more with a warm-up.
// Callers that collide add 64 bytes per processor. The zero QPS is not
// usable; make one with [NewQPS].
type QPS struct {
	limit  atomic.Int64
	leases atomic.Pointer[leases] // nil until callers collide on a count word
	slots  []atomic.Uint64        // count words, one per slot
	k      uint64                 // buckets per interval
	mask   uint64                 // slots - 1
	grid   timegrid.Grid
	clock  clock.Clock
	warm   *warmUp       // nil without warm-up
	open   atomic.Uint64 // the open bucket's index << 1, | 1 once its slot is published
	base   atomic.Int64  // the open bucket's base: allowed in the k buckets before it
	lent   atomic.Uint64 // the open bucket's lending word (see borrow)
}

// A count word is a bucket's tag, a sealed bit, and the number allowed in
// the bucket. The lending word, laid out as a count word, counts the
// prioritized requests the open bucket has let into the next one.
const (
	countBits = 32
	countMask = 1<<countBits - 1
	sealedBit = 1 << countBits
	tagShift  = countBits + 1
)

// holds reports whether count word w belongs to bucket b. Tags keep the low
// 31 bits of the bucket index. The protocol does not rely on them to tell
// buckets apart (see advance): they stop a caller that loaded a word and
// stalled while later buckets opened in its slot from changing them. A stall
// of an exact multiple of 2^31 buckets between the load and the
// compare-and-swap (36 minutes with 1 µs buckets, 2.7 years with the default
// 40 ms) would get past them; nothing shorter can. Lease cells carry the
// same tags, for the same reason.
func holds(w, b uint64) bool { return w>>tagShift == (b<<tagShift)>>tagShift }

// QPSSettings configure a [QPS] limiter. Limit and Interval say what the
// limit is; every other zero field takes its default.
type QPSSettings struct {
	// Limit is the most requests allowed in any interval, in
	// [0, 2^32-1]. 0 allows nothing.
	Limit int64
	// Interval is the length of the intervals the limit holds over. It
	// must be positive.
	Interval time.Duration
	// Buckets is how many buckets divide the interval (default 25, at most
	// 65536). Each must be whole nanoseconds, at least 1 µs. More buckets
	// allow closer to the limit under overload, at 8 bytes each.
	Buckets int
	// WarmUp, if positive, makes the limiter start cold and warm up over
	// that period (see [QPS]). It must span at least two intervals and ten
	// buckets.
	WarmUp time.Duration
	// ColdFactor divides the limit while the limiter is cold (default 3,
	// with WarmUp only). It must be above 1 and at most Limit.
	ColdFactor float64
	// Clock is the clock the limiter reads (default clock.System).
	Clock clock.Clock
}

// NewQPS returns a limiter of the given settings. A bad setting is a
// configuration error naming it.
func NewQPS(s QPSSettings) (*QPS, error) { return newQPS(s, false) }

// newQPS is NewQPS; paced makes a Throttle's meter, whose warm-up measures
// use in time (see warmUp).
func newQPS(s QPSSettings, paced bool) (*QPS, error) {
	if s.Limit < 0 || s.Limit > maxLimit {
		return nil, badLimit(s.Limit, 0)
	}
	if s.Buckets == 0 {
		s.Buckets = flowlimits.DefaultBuckets
	}
	if we := timegrid.CheckWindow(s.Interval, s.Buckets); we != nil {
		return nil, &configError{Pkg: "flow", Field: we.Arg, Value: we.Value, Detail: we.Detail}
	}
	if err := checkWarmUp(s.WarmUp, &s.ColdFactor); err != nil {
		return nil, err
	}
	k := time.Duration(s.Buckets)
	// The open bucket and the k before it must sit in distinct slots, and the
	// next bucket in yet another, so that opening it overwrites nothing a
	// decision still reads.
	slots := 1 << bits.Len(uint(s.Buckets+1))
	q := &QPS{
		k:     uint64(s.Buckets),
		grid:  timegrid.New(s.Interval/k, int64(s.Buckets)),
		mask:  uint64(slots - 1),
		clock: clockOr(s.Clock),
		slots: make([]atomic.Uint64, slots),
	}
	q.limit.Store(s.Limit)
	if s.WarmUp != 0 {
		w, err := newWarmUp(s.Limit, s.Interval, s.WarmUp, s.ColdFactor, s.Buckets, paced)
		if err != nil {
			return nil, err
		}
		q.warm = w
	}
	// Bucket 0, before any real one, is open, published and empty; every
	// slot and the lending word are sealed, so nothing is mistaken for an
	// open bucket and bucket 0 lends nothing.
	for i := range q.slots {
		q.slots[i].Store(sealedBit)
	}
	q.lent.Store(sealedBit)
	q.open.Store(1)
	return q, nil
}

// Allow decides whether one request may proceed now.
func (q *QPS) Allow() Decision { return q.AllowNAt(q.clock.Now(), 1) }

// AllowN decides whether n requests may proceed now.
func (q *QPS) AllowN(n int64) Decision { return q.AllowNAt(q.clock.Now(), n) }

// AllowAt decides whether one request arriving at time now may proceed.
func (q *QPS) AllowAt(now int64) Decision { return q.AllowNAt(now, 1) }

// AllowNAt decides whether n requests arriving at time now may proceed. It
// counts them if so: all n or none. n <= 0 is allowed and counts nothing.
// n above the limit is blocked with [ExceedsLimit]. Blocked with
// [RateLimited], RetryAfter says when the requests would fit if nothing
// else were allowed. With a warm-up, RetryAfter assumes the limit stays as
// it is; it is 0 when n exceeds the limit in force.
func (q *QPS) AllowNAt(now int64, n int64) Decision {
	d, _ := q.decide(now, n)
	return d
}

// A Grant is what a limiter counted for what it allowed, to give back
// later. [QPS.GrantNAt] and [RetryBudget.RetryAt] return one; their
// GiveBack takes it. The zero Grant holds nothing.
type Grant struct {
	bucket uint64
	n      int64
}

// GrantNAt is [QPS.AllowNAt], and returns what it counted if it allowed
// the requests.
func (q *QPS) GrantNAt(now int64, n int64) (Decision, Grant) {
	d, b := q.decide(now, n)
	if !d.Allowed || n <= 0 {
		return d, Grant{}
	}
	return d, Grant{bucket: b, n: n}
}

// GiveBack uncounts the requests of g, which did not proceed after all.
// They then take no place in any interval. It gives back while their
// bucket is in the limiter's ring, and does nothing after. Giving a grant
// back twice may let others through in its place. A grant may rarely stay
// counted (see advance), which never lets more through.
func (q *QPS) GiveBack(g Grant) {
	if g.n <= 0 {
		return
	}
	c := &q.slots[g.bucket&q.mask]
	for {
		// An open or a sealed count word alike: a sum read before the
		// change counted the requests, one read after does not, and both
		// are at least what went through.
		w := c.Load()
		if !holds(w, g.bucket) || int64(w&countMask) < g.n {
			return
		}
		if c.CompareAndSwap(w, w-uint64(g.n)) {
			return
		}
	}
}

// decide is AllowNAt, and returns, for allowed requests, the bucket they are
// counted in.
func (q *QPS) decide(now, n int64) (Decision, uint64) {
	if n <= 0 {
		return allowed, 0
	}
	if n > q.limit.Load() {
		return Decision{Reason: ExceedsLimit}, 0
	}
	bn := q.grid.Index(now)
	if ls := q.leases.Load(); ls != nil {
		return q.decideLeasing(ls, ls.cell(), now, bn, n)
	}
	for {
		ob, w := q.openCount(bn)
		base, own, lim := q.base.Load(), int64(w&countMask), q.bucketLimit()
		if base+own+n > lim {
			return q.blocked(now, ob, base, own, n, lim), 0
		}
		c := &q.slots[ob&q.mask]
		if c.CompareAndSwap(w, w+uint64(n)) {
			return allowed, ob
		}
		if v := c.Load(); holds(v, ob) && v&sealedBit == 0 {
			// Another caller counted in ob between the load and the
			// compare-and-swap: the word is contended, so stripe.
			ls := q.stripe()
			return q.decideLeasing(ls, ls.cell(), now, bn, n)
		}
		// ob is closing: look again.
	}
}

// bucketLimit returns the open bucket's limit: the limiter's, read at
// decision time so that SetLimit applies at once, or, while the limiter warms
// up, the limit the bucket opened with.
func (q *QPS) bucketLimit() int64 {
	if q.warm != nil {
		return q.warm.bucketLimit.Load()
	}
	return q.limit.Load()
}

// blocked is the decision blocking n requests for the rate in the open
// bucket ob, which has base and own allowed in its window under limit lim.
func (q *QPS) blocked(now int64, ob uint64, base, own, n, lim int64) Decision {
	return Decision{Reason: RateLimited, RetryAfter: q.retryAfter(now, ob, base, own, n, lim)}
}

// current returns the open bucket for a request falling in bucket bn,
// published: bn itself if bn is later than the open bucket, which it then
// opens.
func (q *QPS) current(bn uint64) uint64 {
	for {
		o := q.open.Load()
		if o&1 == 0 {
			runtime.Gosched() // being published, a few stores away
			continue
		}
		if ob := o >> 1; bn <= ob {
			return ob
		}
		q.advance(o>>1, bn)
	}
}

// openCount returns the open bucket for a request falling in bucket bn, and
// its count word, unsealed.
func (q *QPS) openCount(bn uint64) (uint64, uint64) {
	for {
		ob := q.current(bn)
		if w := q.slots[ob&q.mask].Load(); holds(w, ob) && w&sealedBit == 0 {
			return ob, w
		}
		runtime.Gosched() // sealed: a later bucket is opening, a few stores away
	}
}

// advance tries to move the open bucket from ob to bn > ob. It seals ob's
// count word and the lending word, and moves open to bn, marked
// unpublished. The caller whose move succeeds, alone from then on, gives
// back the places still leased in ob's cells (see leases), leaving ob's count
// word with the places used; sums the buckets of bn's window; writes sealed
// placeholders for the buckets skipped in bn's window; stores bn's base and
// lending word, publishes bn's count word, and marks open published. A
// caller whose move fails, or who finds ob already gone, gives up and looks
// again.
//
// Invariant: every slot but the open bucket's is sealed, and every bucket in
// the window of the open bucket sits in its slot with its own tag: opened
// buckets were sealed in place, skipped ones have placeholders. So the base
// is exact, and nothing depends on tags telling far-apart buckets apart.
// A sealed count word changes afterwards only when the caller that opens
// the next bucket gives back ob's leases, before anyone reads it for a sum,
// and when GiveBack lowers it: a sum read before that counts the requests
// given back, one read after does not, and both are at least what went
// through.
func (q *QPS) advance(ob, bn uint64) {
	c := &q.slots[ob&q.mask]
	used, ok := q.seal(c, ob)
	if !ok {
		return
	}
	lent, ok := q.seal(&q.lent, ob)
	if !ok {
		return
	}
	if !q.open.CompareAndSwap(ob<<1|1, bn<<1) {
		return
	}
	if ls := q.leases.Load(); ls != nil {
		if back := ls.giveBack(ob); back > 0 {
			used -= back
			c.Store(ob<<tagShift | sealedBit | uint64(used))
		}
	}
	var base int64
	if ob+q.k >= bn {
		for b := bn - q.k; b <= ob; b++ {
			if w := q.slots[b&q.mask].Load(); holds(w, b) {
				base += int64(w & countMask)
			}
		}
	}
	// What ob lent belongs to bucket ob+1: bn starts with it, or, if bn is
	// later, ob+1 gets a placeholder holding it.
	own := lent
	if bn > ob+1 {
		own = 0
		if ob+1+q.k >= bn {
			base += lent
		}
	}
	if q.warm != nil {
		// Read ob's window and state before bn's replace them.
		cold, carry := q.nextCold(ob, bn, used, lent)
		// Places lent to bn were allowed under ob's limit; should bn's be
		// lower (the limiter cooled), it still holds them, so that no
		// interval ending in bn holds more than bn's limit.
		limit := max(q.warm.limitAt(cold), min(base+own, q.limit.Load()))
		q.warm.opened(limit, cold, carry)
	}
	for b := max(ob+1, bn-q.k); b < bn; b++ {
		var n uint64
		if b == ob+1 {
			n = uint64(lent)
		}
		q.slots[b&q.mask].Store(b<<tagShift | sealedBit | n)
	}
	q.base.Store(base)
	q.lent.Store(bn << tagShift)
	q.slots[bn&q.mask].Store(bn<<tagShift | uint64(own))
	q.open.Store(bn<<1 | 1)
}

// seal seals a count or lending word of the open bucket ob and returns its
// final count. It reports false if ob is no longer the open bucket: the
// caller is late, and must touch nothing.
func (q *QPS) seal(word *atomic.Uint64, ob uint64) (int64, bool) {
	for {
		w := word.Load()
		if !holds(w, ob) || q.open.Load() != ob<<1|1 {
			return 0, false
		}
		if w&sealedBit != 0 || word.CompareAndSwap(w, w|sealedBit) {
			return int64(w & countMask), true
		}
	}
}

// coldAt returns the coldness of the bucket open at time now, or of one
// opened since: a Throttle with warm-up paces by it.
func (q *QPS) coldAt(now int64) float64 {
	q.current(q.grid.Index(now))
	return math.Float64frombits(q.warm.bucketCold.Load())
}

// placeTimeAt returns the time one place given at time now takes, for a
// Throttle's meter: the pace at the coldness of the bucket open at now,
// or of one opened since (see warmUp.onePlace).
func (q *QPS) placeTimeAt(now int64) int64 {
	q.current(q.grid.Index(now))
	return q.warm.onePlace.Load()
}

// countAt counts n requests allowed at time now by someone else, without
// checking the limit: a Throttle with warm-up paces its requests itself and
// counts them here, so that they warm the curve.
func (q *QPS) countAt(now, n int64) {
	bn := q.grid.Index(now)
	for {
		ob, w := q.openCount(bn)
		if int64(w&countMask)+n > maxLimit {
			return // the count saturates, as no limit is that high
		}
		if q.slots[ob&q.mask].CompareAndSwap(w, w+uint64(n)) {
			return
		}
	}
}

// AllowPriorityN decides whether n prioritized requests may proceed now.
// See [QPS.AllowPriorityNAt].
func (q *QPS) AllowPriorityN(n int64, maxWait time.Duration) Decision {
	return q.AllowPriorityNAt(q.clock.Now(), n, maxWait)
}

// AllowPriorityNAt decides whether n prioritized requests arriving at time
// now may proceed. With room in the open bucket, it is [QPS.AllowNAt].
// Without, the requests may borrow places in the next bucket. They are
// counted there, and must wait until it starts: Decision.Wait, at most
// maxWait.
//
// Borrowing keeps the guarantee and costs no memory. The next bucket lends
// no more than the bucket that leaves the window when it opens held.
func (q *QPS) AllowPriorityNAt(now int64, n int64, maxWait time.Duration) Decision {
	d, _ := q.decidePriority(now, n, maxWait)
	return d
}

// decidePriority is AllowPriorityNAt, and returns, for allowed requests, the
// bucket they are counted in.
func (q *QPS) decidePriority(now, n int64, maxWait time.Duration) (Decision, uint64) {
	for {
		d, b := q.decide(now, n)
		if d.Reason != RateLimited {
			return d, b
		}
		if bd, b, done := q.borrow(now, n, maxWait); done {
			if bd.Allowed {
				return bd, b
			}
			return d, 0
		}
		runtime.Gosched() // the open bucket is moving
	}
}

// borrow tries to let n requests blocked by the open bucket into the next
// one, and returns the bucket they are counted in. It reports done = false
// when the open bucket is moving, so that the caller decides again.
func (q *QPS) borrow(now, n int64, maxWait time.Duration) (d Decision, into uint64, done bool) {
	for {
		o := q.open.Load()
		if o&1 == 0 {
			return Decision{}, 0, false
		}
		ob := o >> 1
		wait := q.grid.Start(ob+1) - timegrid.Clamp(now)
		if wait > int64(maxWait) {
			return Decision{}, 0, true
		}
		w := q.lent.Load()
		if !holds(w, ob) || w&sealedBit != 0 {
			return Decision{}, 0, false // ob is being sealed
		}
		// The bucket that leaves the window when ob+1 opens is sealed.
		var leaving int64
		if lw := q.slots[(ob-q.k)&q.mask].Load(); holds(lw, ob-q.k) {
			leaving = int64(lw & countMask)
		}
		if int64(w&countMask)+n > leaving {
			return Decision{}, 0, true
		}
		if q.lent.CompareAndSwap(w, w+uint64(n)) {
			return Decision{Allowed: true, Wait: time.Duration(max(wait, 0))}, ob + 1, true
		}
	}
}

// retryAfter returns how long after now n more requests would fit, if
// nothing else were allowed, given that the open bucket ob has base and own
// allowed in its window. As buckets ob+1, ob+2, ... open, buckets ob-k,
// ob-k+1, ... leave the window; the places ob lent count from ob+1 on.
// It returns 0 when the requests exceed the bucket's limit itself, which only
// warming up can raise.
func (q *QPS) retryAfter(now int64, ob uint64, base, own, n, lim int64) time.Duration {
	if n > lim {
		return 0
	}
	var lent int64
	if w := q.lent.Load(); holds(w, ob) {
		lent = int64(w & countMask)
	}
	total := base + own + lent
	j := uint64(1)
	for ; j <= q.k+2; j++ {
		switch leaving := ob - q.k + j - 1; {
		case leaving == ob:
			total -= own
		case leaving == ob+1:
			total -= lent
		default:
			if w := q.slots[leaving&q.mask].Load(); holds(w, leaving) {
				total -= int64(w & countMask)
			}
		}
		if total+n <= lim {
			break
		}
	}
	return time.Duration(max(q.grid.Start(ob+j)-timegrid.Clamp(now), 0))
}

// limitNow returns the most requests the limiter allows in any interval.
func (q *QPS) limitNow() int64 { return q.limit.Load() }

// SetLimit changes the limit, keeping the counts. The requests already
// allowed count against the new limit, which every decision then reads.
// Places leased or borrowed before the change may still be used for up to
// two bucket widths; every interval starting after that holds the new
// limit.
//
// A limiter with a warm-up keeps its limit: make a new one. That, and a
// limit outside [0, 2^32-1], is a configuration error, and the limit in force
// stays.
func (q *QPS) SetLimit(limit int64) error {
	if q.warm != nil {
		return &configError{Pkg: "flow", Field: "limit", Value: limit, Detail: "a limiter with warm-up keeps its limit: make a new one"}
	}
	if limit < 0 || limit > maxLimit {
		return badLimit(limit, 0)
	}
	q.limit.Store(limit)
	return nil
}
