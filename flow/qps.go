package flow

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/timegrid"
)

// DefaultBuckets is the number of buckets a QPS limiter divides its interval
// into unless told otherwise: under steady overload it admits 25/26 (96%) of
// its limit.
const DefaultBuckets = 25

// MaxLimit is the largest limit a QPS limiter accepts.
const MaxLimit = 1<<countBits - 1

// A QPS limiter admits at most limit requests in every interval of its
// length, wherever the interval starts: not only in the intervals aligned to
// its buckets, and not on average. With a limit of 100 per second, no second
// of the limiter's time, from any nanosecond to the same nanosecond one second
// later, holds more than 100 admissions.
//
// How: the interval is divided into k buckets (WithBuckets; DefaultBuckets by
// default). An interval of the limiter's length touches at most k+1 of them,
// so a request is admitted only if the bucket it falls in and the k buckets
// before it hold, with it, no more than the limit. The price of counting the
// oldest bucket whole, although part of it has left the interval, is
// throughput: under steady overload the limiter admits k/(k+1) of its limit
// (96% with the default). Finer buckets raise that, at 16 bytes each;
// deciding costs the same.
//
// Only the newest bucket admits. Opening a bucket seals the one before it, so
// the sum over the k buckets before the open one, its base, is fixed when the
// bucket opens, and admission is a single compare-and-swap on the open
// bucket's count against limit - base. A caller whose time falls in an older
// bucket than the open one (it read the clock, then lost the race to a caller
// with a later time) is counted in the open bucket: the guarantee holds for
// the times at which the limiter counts requests, which never go backwards.
//
// With WithWarmUp the limit starts lower and rises as traffic warms the
// limiter up; each bucket's limit is fixed when it opens, so the guarantee
// holds for it, and never exceeds the configured limit. RetryAfter then
// assumes the limit stays as it is.
//
// A QPS limiter is safe for concurrent use. Deciding allocates nothing and
// takes no lock; the one caller that opens a bucket sums k counts.
type QPS struct {
	limit int64
	k     uint64 // buckets per interval
	grid  timegrid.Grid
	mask  uint64 // slots - 1
	clock clock.Clock
	warm  *warmUp       // nil without warm-up
	open  atomic.Uint64 // index of the bucket admitting now; 0 before the first
	slots []qpsSlot
}

// A qpsSlot holds one bucket. Its count word is the bucket's tag, a sealed
// bit, and the number admitted in the bucket; base is the number admitted in
// the k buckets before it, stored before the count word is published. Its
// borrow word, laid out as the count word, counts the prioritized requests
// admitted into the next bucket while this one is open.
type qpsSlot struct {
	count  atomic.Uint64
	borrow atomic.Uint64
	base   atomic.Int64
	limit  atomic.Int64  // the bucket's limit: the limiter's, or lower while it warms up
	cold   atomic.Uint64 // with warm-up, the bucket's coldness (float64 bits)
}

const (
	countBits = 40
	countMask = 1<<countBits - 1
	sealedBit = 1 << countBits
	tagShift  = countBits + 1
)

// holds reports whether count word w belongs to bucket b. Tags keep the low
// 23 bits of the bucket index; two buckets of one slot that far apart are
// never both in play.
func holds(w, b uint64) bool { return w>>tagShift == (b<<tagShift)>>tagShift }

// NewQPS returns a limiter admitting at most limit requests in any interval
// of the given length. limit must be in [0, MaxLimit] (0 refuses everything);
// the interval must be positive and divide into the buckets (DefaultBuckets
// unless WithBuckets says otherwise) in whole nanoseconds of at least 1 µs
// each.
func NewQPS(limit int64, interval time.Duration, opts ...Option) (*QPS, error) {
	o := buildOptions(opts)
	if limit < 0 || limit > MaxLimit {
		return nil, fmt.Errorf("%w: limit = %d: must be between 0 and %d", ErrInvalidConfig, limit, int64(MaxLimit))
	}
	if interval <= 0 {
		return nil, fmt.Errorf("%w: interval = %v: must be positive", ErrInvalidConfig, interval)
	}
	if o.buckets < 1 || o.buckets > 1<<16 {
		return nil, fmt.Errorf("%w: buckets = %d: must be between 1 and %d", ErrInvalidConfig, o.buckets, 1<<16)
	}
	k := time.Duration(o.buckets)
	if interval%k != 0 {
		return nil, fmt.Errorf("%w: interval = %v: does not divide into %d buckets of whole nanoseconds", ErrInvalidConfig, interval, o.buckets)
	}
	if err := timegrid.Check(int64(k), interval/k); err != nil {
		return nil, fmt.Errorf("%w: %w (interval %v in %d buckets)", ErrInvalidConfig, err, interval, o.buckets)
	}
	// The open bucket and the k before it must sit in distinct slots, and the
	// next bucket in yet another, so that opening it overwrites nothing a
	// decision still reads.
	slots := 1 << bits.Len(uint(o.buckets+1))
	q := &QPS{
		limit: limit,
		k:     uint64(o.buckets),
		grid:  timegrid.New(interval/k, int64(o.buckets)),
		mask:  uint64(slots - 1),
		clock: o.clock,
		slots: make([]qpsSlot, slots),
	}
	if o.warmUp != 0 || o.cold != 0 {
		w, err := newWarmUp(limit, interval, o.warmUp, o.cold, o.buckets)
		if err != nil {
			return nil, err
		}
		q.warm = w
	}
	return q, nil
}

// Allow decides whether one request may proceed now.
func (q *QPS) Allow() Decision { return q.AllowNAt(q.clock.Now(), 1) }

// AllowN decides whether n requests may proceed now.
func (q *QPS) AllowN(n int64) Decision { return q.AllowNAt(q.clock.Now(), n) }

// AllowAt decides whether one request arriving at time now may proceed.
func (q *QPS) AllowAt(now int64) Decision { return q.AllowNAt(now, 1) }

// AllowNAt decides whether n requests arriving at time now may proceed, and
// counts them if so: all n or none. n <= 0 is allowed and counts nothing; n
// above the limit is refused with ExceedsLimit. A refusal for the rate says
// in RetryAfter when, if nothing else is admitted, the requests would fit.
func (q *QPS) AllowNAt(now int64, n int64) Decision {
	if n <= 0 {
		return allowed
	}
	if n > q.limit {
		return Decision{Reason: ExceedsLimit}
	}
	bn := q.grid.Index(now)
	for {
		ob := q.open.Load()
		if bn > ob {
			q.advance(ob, bn)
			continue
		}
		s := &q.slots[ob&q.mask]
		w := s.count.Load()
		if !holds(w, ob) || w&sealedBit != 0 {
			// The open bucket is being published, or sealed because a
			// later one is opening: a few stores away. Let them finish.
			runtime.Gosched()
			continue
		}
		used := s.base.Load() + int64(w&countMask)
		if lim := s.limit.Load(); used+n > lim {
			return Decision{Reason: RateLimited, RetryAfter: q.retryAfter(now, ob, used+n-lim)}
		}
		if s.count.CompareAndSwap(w, w+uint64(n)) {
			return allowed
		}
	}
}

// openAt returns the bucket admitting at time now, opening it if needed, and
// its slot, published.
func (q *QPS) openAt(now int64) (uint64, *qpsSlot) {
	bn := q.grid.Index(now)
	for {
		ob := q.open.Load()
		if bn > ob {
			q.advance(ob, bn)
			continue
		}
		s := &q.slots[ob&q.mask]
		if w := s.count.Load(); holds(w, ob) && w&sealedBit == 0 {
			return ob, s
		}
		runtime.Gosched() // being published or sealed
	}
}

// limitAt returns the limit of the bucket admitting at time now: the
// configured limit, or less while the limiter warms up.
func (q *QPS) limitAt(now int64) int64 {
	_, s := q.openAt(now)
	return s.limit.Load()
}

// countAt counts n requests admitted at time now by someone else, without
// checking the limit: a Throttle with warm-up paces its requests itself and
// counts them here, so that they warm the curve.
func (q *QPS) countAt(now, n int64) {
	for {
		ob, s := q.openAt(now)
		w := s.count.Load()
		if !holds(w, ob) || w&sealedBit != 0 {
			continue
		}
		if int64(w&countMask)+n > MaxLimit {
			return // the count saturates, as no limit is that high
		}
		if s.count.CompareAndSwap(w, w+uint64(n)) {
			return
		}
	}
}

// advance tries to move the open bucket from ob to bn > ob: seal ob, sum the
// k buckets before bn, and publish bn. If another caller moves the open
// bucket first, advance gives up and the caller looks again.
func (q *QPS) advance(ob, bn uint64) {
	var used int64 // admitted in ob
	if ob != 0 {   // 0 is the state before the first bucket, nothing to seal
		s := &q.slots[ob&q.mask]
		for {
			w := s.count.Load()
			if !holds(w, ob) {
				// ob's opener has not yet published it.
				runtime.Gosched()
				if q.open.Load() != ob {
					return
				}
				continue
			}
			if w&sealedBit != 0 || s.count.CompareAndSwap(w, w|sealedBit) {
				used = int64(w & countMask)
				break
			}
		}
	}
	// Seal ob's borrowing too: the requests it admitted into ob+1 are now
	// fixed.
	var borrowed int64
	if ob != 0 {
		s := &q.slots[ob&q.mask]
		for {
			w := s.borrow.Load()
			if w&sealedBit != 0 || s.borrow.CompareAndSwap(w, w|sealedBit) {
				borrowed = int64(w & countMask)
				break
			}
		}
	}
	// Every bucket opened before ob was sealed when its successor opened, so
	// the counts summed here can no longer change. Buckets in the range that
	// were never opened hold another bucket's tag and count as empty.
	var base int64
	if ob+q.k >= bn {
		for b := bn - q.k; b <= ob; b++ {
			if w := q.slots[b&q.mask].count.Load(); holds(w, b) {
				base += int64(w & countMask)
			}
		}
	}
	// What ob lent belongs to bucket ob+1: bn starts with it, or, if time
	// skipped past ob+1, it is in bn's window and ob+1 is written down sealed
	// so that the buckets after bn count it too.
	own := borrowed
	skipped := borrowed > 0 && bn > ob+1
	if skipped {
		own = 0
		used += borrowed
		if ob+1+q.k >= bn {
			base += borrowed
		}
	}
	limit, cold := q.limit, 0.0
	if q.warm != nil {
		prev, prevLimit := q.warm.max, q.warm.limitAt(q.warm.max) // the limiter starts cold
		if ob != 0 {
			prev = math.Float64frombits(q.slots[ob&q.mask].cold.Load())
			prevLimit = q.slots[ob&q.mask].limit.Load()
		}
		cold = q.warm.next(prev, prevLimit, used, base, bn-ob)
		limit = q.warm.limitAt(cold)
	}
	if !q.open.CompareAndSwap(ob, bn) {
		return
	}
	// Only the caller that moved the open bucket publishes it, and it summed
	// the base after sealing exactly the bucket it moved from.
	if skipped && bn-(ob+1) <= q.mask {
		q.slots[(ob+1)&q.mask].count.Store((ob+1)<<tagShift | sealedBit | uint64(borrowed))
	}
	s := &q.slots[bn&q.mask]
	s.base.Store(base)
	s.limit.Store(limit)
	s.cold.Store(math.Float64bits(cold))
	s.borrow.Store(bn << tagShift)
	s.count.Store(bn<<tagShift | uint64(own))
}

// AllowPriority decides whether one prioritized request may proceed now. See
// AllowPriorityNAt.
func (q *QPS) AllowPriority(maxWait time.Duration) Decision {
	return q.AllowPriorityNAt(q.clock.Now(), 1, maxWait)
}

// AllowPriorityNAt decides whether n prioritized requests arriving at time
// now may proceed. When the open bucket has room, it is AllowNAt. When it has
// none, the requests may borrow places in the next bucket (Sentinel's
// occupiable window): they are counted in that bucket and must wait until it
// starts, Decision.Wait, which must not exceed maxWait.
//
// Borrowing keeps the guarantee: the next bucket can lend no more than the
// bucket that leaves the window when it opens held, so no interval, the ones
// ending in the next bucket included, ever holds more than the limit.
func (q *QPS) AllowPriorityNAt(now int64, n int64, maxWait time.Duration) Decision {
	for {
		d := q.AllowNAt(now, n)
		if d.Reason != RateLimited {
			return d
		}
		if b, done := q.borrow(now, n, maxWait); done {
			if b.Allowed {
				return b
			}
			return d
		}
	}
}

// borrow tries to admit n requests refused by the open bucket into the next
// one. It reports done = false when the open bucket moved meanwhile, so that
// the caller decides again.
func (q *QPS) borrow(now, n int64, maxWait time.Duration) (d Decision, done bool) {
	for {
		ob := q.open.Load()
		wait := q.grid.Start(ob+1) - now
		if wait > int64(maxWait) {
			return Decision{}, true
		}
		s := &q.slots[ob&q.mask]
		w := s.borrow.Load()
		if !holds(w, ob) || w&sealedBit != 0 {
			return Decision{}, false // ob is being published or sealed
		}
		// The bucket that leaves the window when ob+1 opens is sealed.
		var leaving int64
		if lw := q.slots[(ob-q.k)&q.mask].count.Load(); holds(lw, ob-q.k) {
			leaving = int64(lw & countMask)
		}
		if int64(w&countMask)+n > leaving {
			return Decision{}, true
		}
		if s.borrow.CompareAndSwap(w, w+uint64(n)) {
			return Decision{Allowed: true, Wait: time.Duration(max(wait, 0))}, true
		}
	}
}

// retryAfter returns how long after now the open bucket ob frees need more
// places: buckets ob-k, ob-k+1, ... leave the window as buckets ob+1, ob+2,
// ... open, and after k+1 of them the window is empty.
func (q *QPS) retryAfter(now int64, ob uint64, need int64) time.Duration {
	var freed int64
	j := uint64(1)
	for ; j <= q.k; j++ {
		b := ob - q.k + j - 1
		if w := q.slots[b&q.mask].count.Load(); holds(w, b) {
			freed += int64(w & countMask)
		}
		if freed >= need {
			break
		}
	}
	return time.Duration(max(q.grid.Start(ob+j)-now, 0))
}

// Limit returns the most requests the limiter admits in any interval.
func (q *QPS) Limit() int64 { return q.limit }

// Interval returns the length of the limiter's interval.
func (q *QPS) Interval() time.Duration { return time.Duration(q.grid.Width * int64(q.k)) }
