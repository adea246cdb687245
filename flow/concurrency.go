package flow

import (
	"unsafe"

	"github.com/slidegate/slidegate/internal/stripe"
)

// A Concurrency limiter allows a request only while fewer than its limit
// are in flight. Deciding and counting are one compare-and-swap, so no
// number of concurrent callers can push the count past the limit. Under
// contention on four processors or more, each processor keeps a few free
// places of the limit, so that requests that come and go on one processor
// write only its own cache line. A request may then be refused while
// another processor frees a place at the same moment, never admitted over
// the limit.
//
// A limiter per key ([ConcurrencySettings.PerKey]) limits each key to its
// own number in flight: a key is a user, a tenant or a client address. At
// no moment does a key hold more than its limit, however many keys there
// are. Keys in the overrides have limits of their own. Its memory is fixed
// when it is made: a sketch sized for the keys in flight at once
// ([ConcurrencySettings.Keys]), and about 140 bytes per override. More
// keys than that never go over their limits, but are refused early more
// often. At the sizing, a key with a limit of 1 is refused early with
// probability 0.9%; with a limit of 2, 0.006%. A limiter not per key
// ignores the key it is given; "" says so.
//
// It reads no clock: it counts places, taken by [Concurrency.Acquire] and
// given back by [Permit.Done]. It is safe for concurrent use, takes no
// lock, and neither allocates. A key is hashed whole: its length is the
// caller's to bound. The zero Concurrency is not usable; make one with
// [NewConcurrency].
type Concurrency struct {
	places placePool       // not per key: the places in flight, by processor
	keys   *keyConcurrency // per key: the keys' places; nil otherwise
}

// ConcurrencySettings configure a [Concurrency] limiter.
type ConcurrencySettings struct {
	// Limit is the most requests in flight (a key's, per key), in
	// [0, 2^32-1]. 0 allows nothing.
	Limit int64
	// PerKey limits each key by itself. The fields below apply only to it.
	PerKey bool
	// Overrides are keys with limits of their own, in [0, 2^32-1].
	Overrides map[string]int64
	// Keys is how many keys the limiter expects in flight at once (default
	// 4096, at most 262144). The sketch takes 256 bytes per key, rounded up
	// to a power of two.
	Keys int
	// KeyMemory is the budget the sketch draws from, at most a sixteenth
	// of it, halved down to 4 KiB if short (default: a budget of its own).
	KeyMemory *KeyMemory
}

// NewConcurrency returns a Concurrency limiter of the given settings. A bad
// setting is a configuration error naming it.
func NewConcurrency(s ConcurrencySettings) (*Concurrency, error) {
	if s.Limit < 0 || s.Limit > maxLimit {
		return nil, badLimit(s.Limit, 0)
	}
	c := &Concurrency{}
	switch {
	case s.PerKey:
		keys, err := newKeyConcurrency(s)
		if err != nil {
			return nil, err
		}
		c.keys = keys
	case s.Overrides != nil:
		return nil, &configError{Pkg: "flow", Field: "overrides", Value: len(s.Overrides), Detail: "apply only to a limiter per key"}
	case s.Keys != 0:
		return nil, &configError{Pkg: "flow", Field: "keys", Value: s.Keys, Detail: "applies only to a limiter per key"}
	case s.KeyMemory != nil:
		return nil, &configError{Pkg: "flow", Field: "key_memory", Value: s.KeyMemory.limit, Detail: "applies only to a limiter per key"}
	}
	c.places.init(s.Limit)
	return c, nil
}

// Acquire takes one place for key if the limit allows. When allowed it
// fills p, a zero or done [Permit], and the caller calls [Permit.Done] when
// the request ends. A nil p is blocked with [ExceedsLimit]: its places
// could never be given back.
func (c *Concurrency) Acquire(p *Permit, key string) Decision { return c.AcquireN(p, key, 1) }

// AcquireN takes n places for key, all or none, as [Concurrency.Acquire]
// does. n <= 0 is allowed and takes nothing. n above the limit (the
// key's) is blocked with [ExceedsLimit]. n that does not fit beside the
// places held (the key's) is blocked with [ConcurrencyLimited].
func (c *Concurrency) AcquireN(p *Permit, key string, n int64) Decision {
	if c.keys != nil {
		return c.keys.acquireN(p, key, n)
	}
	if p == nil {
		return Decision{Reason: ExceedsLimit}
	}
	if n <= 0 {
		return allowed
	}
	pl := &c.places
	limit := pl.limit.Load()
	if n > limit {
		return Decision{Reason: ExceedsLimit}
	}
	// The pool word alone until it is contended (placePool.acquireSlow).
	if pl.cells.Load() == nil {
		var mark byte
		pl.note(uintptr(unsafe.Pointer(&mark)))
		if w := pl.word.Load(); int64(w&takenMask)+n <= limit && pl.word.CompareAndSwap(w, w+uint64(n)) {
			p.fill(byConcurrency, unsafe.Pointer(c), n)
			p.cell = 0
			return allowed
		}
	}
	ok, h := pl.acquireSlow(n)
	if !ok {
		return Decision{Reason: ConcurrencyLimited}
	}
	p.fill(byConcurrency, unsafe.Pointer(c), n)
	p.cell = uint8(h % stripe.Max)
	return allowed
}

// InFlight returns the places taken (key's, per key). Not per key it is
// exact while no request is acquiring or releasing at the same moment. Per key it is exact
// for a key with an override, otherwise the key's estimate in the sketch,
// which is never below them, and may be above when keys share counters.
func (c *Concurrency) InFlight(key string) int64 {
	if c.keys != nil {
		return c.keys.inFlight(key)
	}
	return c.places.held()
}

// limitNow returns the most places that can be taken at once (a key's
// without an override, per key).
func (c *Concurrency) limitNow() int64 {
	if c.keys != nil {
		return c.keys.limitNow()
	}
	return c.places.limit.Load()
}

// Set changes the limit, and per key the overrides, keeping the requests
// in flight. They count against the new limit (the key's, whether it
// gains, keeps or loses an override): after lowering it, no request is
// allowed until enough of them end. A limit outside [0, 2^32-1], a bad
// override and overrides for a limiter not per key are a configuration error,
// and the limits in force stay. Per key, Set takes time in proportion to
// the overrides, old and new; requests go on meanwhile.
func (c *Concurrency) Set(limit int64, overrides map[string]int64) error {
	if c.keys != nil {
		return c.keys.set(limit, overrides)
	}
	if limit < 0 || limit > maxLimit {
		return badLimit(limit, 0)
	}
	if overrides != nil {
		return &configError{Pkg: "flow", Field: "overrides", Value: len(overrides), Detail: "apply only to a limiter per key"}
	}
	c.places.set(limit)
	return nil
}
