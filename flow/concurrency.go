package flow

import (
	"fmt"
	"sync/atomic"
)

// A Concurrency limiter admits a request only while fewer than its limit are
// in flight. Admission and counting are one compare-and-swap, so no number of
// concurrent callers can push the count past the limit (Sentinel checks the
// count, then increments it, and over-admits under load).
//
// A Concurrency limiter is safe for concurrent use; deciding and releasing
// allocate nothing. The zero value is not usable; make one with
// NewConcurrency.
type Concurrency struct {
	limit    atomic.Int64
	inflight atomic.Int64
}

// NewConcurrency returns a limiter admitting at most limit requests in flight.
// limit must be in [0, MaxLimit]; 0 refuses everything.
func NewConcurrency(limit int64) (*Concurrency, error) {
	if limit < 0 || limit > MaxLimit {
		return nil, fmt.Errorf("%w: limit = %d: must be between 0 and %d", ErrInvalidConfig, limit, int64(MaxLimit))
	}
	c := &Concurrency{}
	c.limit.Store(limit)
	return c, nil
}

// A Permit is an admission by a Concurrency limiter: its places stay taken
// until Release. The zero Permit holds nothing.
type Permit struct {
	c        *Concurrency
	n        int64
	released atomic.Bool
}

// Release gives the permit's places back. It is idempotent: only the first
// call, from any goroutine, releases. A Permit must not be copied (go vet
// says so); Acquire fills it through a pointer for that reason. A Permit may
// be reused once released, after which a late Release of the earlier
// admission would release the new one: finish with a Permit before reusing
// it.
func (p *Permit) Release() {
	if p.c != nil && p.released.CompareAndSwap(false, true) {
		p.c.inflight.Add(-p.n)
	}
}

// Acquire takes one place if the limit allows. On admission it fills p, which
// must be a zero or released Permit, and the caller must call p.Release when
// the request is done. A nil p is refused, as its places could never be given
// back.
func (c *Concurrency) Acquire(p *Permit) Decision { return c.AcquireN(p, 1) }

// AcquireN takes n places, all or none, as Acquire does. n <= 0 is admitted
// and takes nothing; n above the limit is refused with ExceedsLimit.
func (c *Concurrency) AcquireN(p *Permit, n int64) Decision {
	if p == nil {
		return Decision{Reason: ExceedsLimit}
	}
	d := c.AllowNAt(0, n)
	if d.Allowed && n > 0 {
		p.c, p.n = c, n
		p.released.Store(false)
	}
	return d
}

// AllowNAt takes n places, all or none, for the Limiter interface; the time
// is not used. The caller gives them back with ReleaseN(n). Prefer Acquire,
// whose Permit cannot be released twice.
func (c *Concurrency) AllowNAt(_ int64, n int64) Decision {
	if n <= 0 {
		return allowed
	}
	limit := c.limit.Load()
	if n > limit {
		return Decision{Reason: ExceedsLimit}
	}
	for {
		cur := c.inflight.Load()
		if cur+n > limit {
			return Decision{Reason: ConcurrencyLimited}
		}
		if c.inflight.CompareAndSwap(cur, cur+n) {
			return allowed
		}
	}
}

// ReleaseN gives back n places taken with AllowNAt.
func (c *Concurrency) ReleaseN(n int64) {
	if n > 0 {
		c.inflight.Add(-n)
	}
}

// InFlight returns the number of places taken.
func (c *Concurrency) InFlight() int64 { return c.inflight.Load() }

// Limit returns the most places that can be taken at once.
func (c *Concurrency) Limit() int64 { return c.limit.Load() }

// SetLimit changes the limit, keeping the requests in flight: they count
// against the new limit, so after lowering it no request is admitted until
// enough of them are released. A limit outside [0, MaxLimit] is refused and
// the limit in force stays.
func (c *Concurrency) SetLimit(limit int64) error {
	if limit < 0 || limit > MaxLimit {
		return fmt.Errorf("%w: limit = %d: must be between 0 and %d", ErrInvalidConfig, limit, int64(MaxLimit))
	}
	c.limit.Store(limit)
	return nil
}
