package flow

import (
	"fmt"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/flowlimits"
	"github.com/slidegate/slidegate/internal/flowstate"
	"github.com/slidegate/slidegate/internal/stripe"
	"github.com/slidegate/slidegate/internal/timegrid"
)

// How a RetryBudget keeps its bound.
//
// The interval of length W is divided into k buckets of width w = W/k.
// Every event is counted at a time t that never goes backwards: a caller
// whose time is earlier than an event already counted is counted at the
// latest bucket. A retry counted at t is allowed only if the retries of the
// bucket holding t and of the k buckets before it, with it, are at most
// ratio times the requests of that bucket and the k-1 before it, plus the
// floor. The first buckets span at least (t−W, t], the second at most, so
//
//	retries in (t−W, t] ≤ ratio × requests in (t−W, t] + minPerSecond × W
//
// holds at every allowed retry, for the requests counted before it. For any
// interval of length W, wherever it starts, the retries in it are bounded
// so by the requests of the interval of length W ending at its last retry.
// Retries are counted over up to W+w and requests over as little as W−w,
// so under steady traffic a budget allows about k/(k+1) of ratio ×
// requests; the floor is never cut.
//
// The first retry decided in a bucket seals the k buckets before it (at
// most k compare-and-swaps), so that a caller who read the clock before
// they closed and decides after cannot add a retry that later decisions
// have not counted, and sums them and the requests (2k-1 words), keeping
// the sums for the decisions after it, which read five words and write
// one. Memory: 192 bytes plus 16 per slot, the slots being k+1 rounded up
// to a power of two, plus 128 bytes per processor for the counts of the
// retries it blocked, and up to 256 bytes that keep those on cache lines
// of their own.

// A RetryBudget bounds the retries a client adds to its traffic. The
// retries of the last interval may be at most Ratio times its requests,
// plus MinPerSecond a second. Under a downstream that fails every request,
// a client that retries three times sends four attempts per request. With
// a budget of 0.2 it sends at most 1.2, and the floor.
//
// A caller counts each original request with [RetryBudget.Request]. It
// asks [RetryBudget.Retry] before each retry, which decides and counts in
// one atomic step. So retries waiting out a backoff are already counted,
// and concurrent failures cannot overshoot the budget. A retry decided but
// not sent after all is given back: see [RetryBudget.RetryAt]. Retries
// never add to the budget.
//
// The bound holds in every interval, wherever it starts. Under steady
// traffic a budget allows about k/(k+1) of Ratio × requests: 95% with 20
// buckets. Retry takes the [Attempt] that failed, so that no retry is sent
// into an open breaker, and no breaker's probe is repeated.
//
// A RetryBudget is safe for concurrent use. Request and Retry take no lock
// and allocate nothing. It takes about 1 KiB with 20 buckets. The zero
// RetryBudget is not usable; make one with [NewRetryBudget].
type RetryBudget struct {
	requests []atomic.Uint64 // count words of the requests, one per slot
	retries  []atomic.Uint64 // count words of the retries, one per slot; sealed once closed
	open     atomic.Uint64   // the latest bucket in which anything was counted
	// For the bucket in its tag, the sum of the sealed retries of the k
	// buckets before it, and of the requests of the k-1 before it; the
	// sealed bit marks a word holding no sum yet.
	retryBase, requestBase atomic.Uint64
	k                      uint64
	mask                   uint64
	ratio                  float64
	floor                  float64 // minPerSecond × interval in seconds
	grid                   timegrid.Grid
	clock                  clock.Clock
	// Totals of the retries not allowed, by why: the budget was spent
	// (word 0 of a stripe), or the attempt was a probe or met an open
	// breaker (word 1). Written only when a retry is blocked, which in a
	// retry storm is every decision: one stripe per processor
	// (internal/stripe), one cache line each, so that cores blocking
	// retries together do not take one line from each other.
	notAllowed []atomic.Uint64
	stripes    uint64 // the stripes' count, a power of two
}

// stripeWords is the words between two stripes of notAllowed: a cache line
// of 128 bytes.
const stripeWords = 16

// countNotAllowed adds one to word w (0 blocked, 1 not retried) of the
// caller's processor's stripe.
func (b *RetryBudget) countNotAllowed(w int) {
	i := (uint64(stripe.Hint()) & (b.stripes - 1)) * stripeWords
	b.notAllowed[i+uint64(w)].Add(1)
}

// sumNotAllowed returns word w summed over the stripes.
func (b *RetryBudget) sumNotAllowed(w int) int64 {
	var n uint64
	for i := uint64(0); i < b.stripes; i++ {
		n += b.notAllowed[i*stripeWords+uint64(w)].Load()
	}
	return int64(n)
}

// An Attempt says how the attempt that failed went through a circuit
// breaker, which decides whether it may be retried at all. A client without
// a breaker passes AttemptFailed.
type Attempt uint8

const (
	// AttemptFailed: the attempt was sent, its breaker (if any) closed, and
	// it failed. It is retried if the budget allows.
	AttemptFailed Attempt = iota
	// AttemptProbe: the attempt was a half-open breaker's probe. It is
	// never retried: its failure is the breaker's answer, and retrying it
	// would send the downstream the load the breaker is there to hold back.
	AttemptProbe
	// AttemptBreakerOpen: the breaker is open and blocked the attempt, or
	// is open now. It is never retried while the breaker stays open.
	AttemptBreakerOpen
)

// RetryBudgetSettings configure a [RetryBudget]. Ratio and MinPerSecond
// say what the budget is; every other zero field takes its default.
type RetryBudgetSettings struct {
	// Ratio is the retries allowed per request, in [0, 100]. With 0.2,
	// retries add at most a fifth to the traffic.
	Ratio float64
	// MinPerSecond is the retries allowed per second whatever the requests,
	// so that a client sending little may still retry; 10 is common.
	MinPerSecond int64
	// Interval is the span the budget counts over (default 10 s).
	// MinPerSecond over it must be at most 2^32-1.
	Interval time.Duration
	// Buckets is how many buckets divide the interval (default 20), each
	// whole nanoseconds of at least 1 µs.
	Buckets int
	// Clock is the clock the budget reads (default clock.System).
	Clock clock.Clock
}

// NewRetryBudget returns a RetryBudget of the given settings. A bad
// setting is a configuration error naming it ("ratio", "min_per_second").
func NewRetryBudget(s RetryBudgetSettings) (*RetryBudget, error) {
	if !(s.Ratio >= 0 && s.Ratio <= flowlimits.MaxRetryRatio) { // NaN fails both
		return nil, &configError{Pkg: "flow", Field: "ratio", Value: s.Ratio, Detail: fmt.Sprintf("must be between 0 and %d", flowlimits.MaxRetryRatio)}
	}
	if s.Interval == 0 {
		s.Interval = flowlimits.DefaultRetryInterval
	}
	if s.Buckets == 0 {
		s.Buckets = flowlimits.DefaultRetryBuckets
	}
	if we := timegrid.CheckWindow(s.Interval, s.Buckets); we != nil {
		return nil, &configError{Pkg: "flow", Field: we.Arg, Value: we.Value, Detail: we.Detail}
	}
	floor := float64(s.MinPerSecond) * s.Interval.Seconds()
	if s.MinPerSecond < 0 || floor > maxLimit {
		return nil, &configError{Pkg: "flow", Field: "min_per_second", Value: s.MinPerSecond, Detail: fmt.Sprintf("must be at least 0, and at most %d per interval of %v", int64(maxLimit), s.Interval)}
	}
	// The retries of the open bucket and of the k before it must sit in
	// distinct slots; the requests need only k.
	slots := 1 << bits.Len(uint(s.Buckets))
	stripes := stripe.Count()
	b := &RetryBudget{
		requests:   make([]atomic.Uint64, slots),
		retries:    make([]atomic.Uint64, slots),
		notAllowed: stripe.Words(stripes * stripeWords),
		stripes:    uint64(stripes),
		k:          uint64(s.Buckets),
		mask:       uint64(slots - 1),
		ratio:      s.Ratio,
		floor:      floor,
		grid:       timegrid.New(s.Interval/time.Duration(s.Buckets), int64(s.Buckets)),
		clock:      clockOr(s.Clock),
	}
	b.retryBase.Store(sealedBit)
	b.requestBase.Store(sealedBit)
	return b, nil
}

// Request counts one original request now: a deposit that lets Ratio
// retries more in the next interval. Retries are not counted with Request.
func (b *RetryBudget) Request() { b.RequestAt(b.clock.Now()) }

// RequestAt counts one original request at time now. A time earlier than
// the latest bucket counted is counted in that bucket. A bucket counts at
// most 2^32-1 requests; more only make the budget smaller.
func (b *RetryBudget) RequestAt(now int64) {
	for {
		i := b.bucket(now)
		s := &b.requests[i&b.mask]
		w := s.Load()
		var next uint64
		switch {
		case holds(w, i):
			if w&countMask == countMask {
				return
			}
			next = w + 1
		case b.open.Load() != i:
			continue // the slot is a later bucket's: count in it
		default:
			// The slot holds a bucket long gone (or nothing): this request
			// opens it.
			next = i<<tagShift | 1
		}
		if s.CompareAndSwap(w, next) {
			return
		}
	}
}

// Retry decides whether a retry after the given failed attempt may be sent
// now, and counts it if so. See [RetryBudget.RetryAt].
func (b *RetryBudget) Retry(a Attempt) (Grant, bool) { return b.RetryAt(b.clock.Now(), a) }

// RetryAt decides at time now whether a retry after the given failed
// attempt may be sent, and counts it if so. It is allowed only if, with it,
// the retries of the interval are at most Ratio times its requests plus
// the floor. The Grant is what it counted: a caller that does not send the
// retry after all gives it back with [RetryBudget.GiveBack]. After
// [AttemptProbe] or [AttemptBreakerOpen] it returns false and takes
// nothing from the budget; it counts as not retried. An unknown Attempt
// counts as AttemptBreakerOpen.
func (b *RetryBudget) RetryAt(now int64, a Attempt) (Grant, bool) {
	if a != AttemptFailed {
		b.countNotAllowed(1)
		return Grant{}, false
	}
decide:
	for {
		i := b.bucket(now)
		retried, ok := b.retriedBefore(i)
		if !ok {
			continue decide
		}
		requested := b.requestedBefore(i)
		if w := b.requests[i&b.mask].Load(); holds(w, i) {
			requested += w & countMask
		}
		allowance := b.ratio*float64(requested) + b.floor
		s := &b.retries[i&b.mask]
		for {
			w := s.Load()
			var r uint64
			switch {
			case holds(w, i) && w&sealedBit == 0:
				r = w & countMask
			case b.open.Load() != i:
				continue decide // i is sealed or its slot reused: a later bucket is open
			default:
				// The slot holds a bucket long gone (or a relic whose tag
				// matches i's): i has no retries yet.
			}
			if float64(retried+r+1) > allowance || r == countMask {
				b.countNotAllowed(0)
				return Grant{}, false
			}
			if s.CompareAndSwap(w, i<<tagShift|(r+1)) {
				return Grant{bucket: i, n: 1}, true
			}
		}
	}
}

// GiveBack uncounts the retry of g, which was not sent after all. It then
// takes no place in the budget, and is no longer counted. Decisions
// see it given back at once while its bucket is the latest, and from the
// next bucket on after that. Once its bucket has left the budget's ring,
// the retry stays counted. Giving a grant back twice may let another retry
// through in its place.
func (b *RetryBudget) GiveBack(g Grant) {
	if g.n <= 0 {
		return
	}
	// A sealed word is given back as an open one is, its sealed bit kept:
	// a sum of the sealed buckets read before the change (retryBase) counts
	// the retry, one read after does not, and both are at least what was
	// sent. Only a sum that counts more than was sent is ever kept.
	s := &b.retries[g.bucket&b.mask]
	for {
		w := s.Load()
		if !holds(w, g.bucket) || w&countMask < uint64(g.n) {
			return
		}
		if s.CompareAndSwap(w, w-uint64(g.n)) {
			return
		}
	}
}

// retriedBefore returns the retries of the k buckets before i, which it
// seals, or false if a bucket later than i has been opened meanwhile. The
// first caller to decide in i sums them and keeps the sum in retryBase:
// once sealed, a bucket's count is final, and a caller still deciding in it
// finds its compare-and-swap failing and decides again in the open bucket.
func (b *RetryBudget) retriedBefore(i uint64) (uint64, bool) {
	base := b.retryBase.Load()
	if holds(base, i) && base&sealedBit == 0 {
		return base & countMask, true
	}
	var retried uint64
	for j := i - b.k; j < i; j++ {
		s := &b.retries[j&b.mask]
		for {
			w := s.Load()
			if holds(w, j) && w&sealedBit != 0 {
				retried += w & countMask
				break
			}
			var sealed uint64
			if holds(w, j) {
				sealed = w | sealedBit
			} else {
				// A bucket long gone: j had no retries, unless the slot
				// holds a later bucket than j, which means buckets later
				// than i have been opened.
				if b.open.Load() != i {
					return 0, false
				}
				sealed = j<<tagShift | sealedBit
			}
			if s.CompareAndSwap(w, sealed) {
				retried += sealed & countMask
				break
			}
		}
	}
	// A sum too large for the word is not kept: kept smaller, it would let
	// retries through.
	if retried <= countMask {
		b.retryBase.CompareAndSwap(base, i<<tagShift|retried)
	}
	return retried, true
}

// requestedBefore returns the requests of the k-1 buckets before i. The
// first caller to decide in i sums them and keeps the sum in requestBase.
// A count still growing (a caller who read the clock before i opened), or a
// slot holding another bucket, only counts fewer, which makes the budget
// smaller, never larger.
func (b *RetryBudget) requestedBefore(i uint64) uint64 {
	base := b.requestBase.Load()
	if holds(base, i) && base&sealedBit == 0 {
		return base & countMask
	}
	var requested uint64
	for j := i - b.k + 1; j < i; j++ {
		if w := b.requests[j&b.mask].Load(); holds(w, j) {
			requested += w & countMask
		}
	}
	requested = min(requested, countMask) // counting fewer is safe
	b.requestBase.CompareAndSwap(base, i<<tagShift|requested)
	return requested
}

// bucket returns the bucket in which an event at time now is counted: the
// bucket holding now, or the latest bucket counted if that is later, which
// it opens if it is later than that.
func (b *RetryBudget) bucket(now int64) uint64 {
	i := b.grid.Index(now)
	for {
		o := b.open.Load()
		if i <= o {
			return o
		}
		if b.open.CompareAndSwap(o, i) {
			return i
		}
	}
}

// A retryStats is what a RetryBudget has counted. Its Requests and
// Retries are those of the last interval: its k buckets up to the one
// holding the time read, or the latest one counted if that is later.
type retryStats = flowstate.RetryStats

// statsAt returns what the budget has counted, its interval read at time
// now. It decides nothing and changes nothing, so a count that changes as
// it reads may be missed or counted in part.
func (b *RetryBudget) statsAt(now int64) retryStats {
	i := max(b.grid.Index(now), b.open.Load())
	st := retryStats{Blocked: b.sumNotAllowed(0), NotRetried: b.sumNotAllowed(1)}
	for j := i - min(b.k-1, i); j <= i; j++ {
		if w := b.retries[j&b.mask].Load(); holds(w, j) {
			st.Retries += int64(w & countMask)
		}
		if w := b.requests[j&b.mask].Load(); holds(w, j) {
			st.Requests += int64(w & countMask)
		}
	}
	return st
}
