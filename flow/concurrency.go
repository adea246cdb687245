package flow

import (
	"sync/atomic"
	"unsafe"
)

// A Concurrency limiter allows a request only while fewer than its limit
// are in flight. Deciding and counting are one compare-and-swap, so no
// number of concurrent callers can push the count past the limit.
//
// It reads no clock: it counts places, taken by [Concurrency.Acquire] and
// given back by [Permit.Done]. It is safe for concurrent use, and neither
// allocates. The zero Concurrency is not usable; make one with
// [NewConcurrency].
type Concurrency struct {
	limit    atomic.Int64
	inflight atomic.Int64
}

// ConcurrencySettings configure a [Concurrency] limiter.
type ConcurrencySettings struct {
	// Limit is the most requests in flight, in [0, 2^32-1]. 0 allows
	// nothing.
	Limit int64
}

// NewConcurrency returns a Concurrency limiter of the given settings. A bad
// setting is a [*ConfigError] naming it.
func NewConcurrency(s ConcurrencySettings) (*Concurrency, error) {
	if s.Limit < 0 || s.Limit > maxLimit {
		return nil, badLimit(s.Limit, 0)
	}
	c := &Concurrency{}
	c.limit.Store(s.Limit)
	return c, nil
}

// Acquire takes one place if the limit allows. When allowed it fills p, a
// zero or done [Permit], and the caller calls [Permit.Done] when the
// request ends. A nil p is blocked with [ExceedsLimit]: its places could
// never be given back.
func (c *Concurrency) Acquire(p *Permit) Decision { return c.AcquireN(p, 1) }

// AcquireN takes n places, all or none, as [Concurrency.Acquire] does. n <=
// 0 is allowed and takes nothing. n above the limit is blocked with
// [ExceedsLimit]. n that does not fit beside the requests in flight is
// blocked with [ConcurrencyLimited].
func (c *Concurrency) AcquireN(p *Permit, n int64) Decision {
	if p == nil {
		return Decision{Reason: ExceedsLimit}
	}
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
			p.fill(byConcurrency, unsafe.Pointer(c), n)
			return allowed
		}
	}
}

// InFlight returns the number of places taken.
func (c *Concurrency) InFlight() int64 { return c.inflight.Load() }

// limitNow returns the most places that can be taken at once.
func (c *Concurrency) limitNow() int64 { return c.limit.Load() }

// SetLimit changes the limit, keeping the requests in flight. They count
// against the new limit: after lowering it, no request is allowed until
// enough of them end. A limit outside [0, 2^32-1] is a [*ConfigError],
// and the limit in force stays.
func (c *Concurrency) SetLimit(limit int64) error {
	if limit < 0 || limit > maxLimit {
		return badLimit(limit, 0)
	}
	c.limit.Store(limit)
	return nil
}
