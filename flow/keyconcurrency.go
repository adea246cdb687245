package flow

import (
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/slidegate/slidegate/internal/flowlimits"
)

// How a Concurrency limiter per key counts keys in fixed memory.
//
// Every key without an override is counted in a counting count-min sketch:
// its requests in flight are added to three counters, picked by a hash
// seeded at random per limiter (so that no one can pick keys that collide)
// among the eight 8-byte counters of one 64-byte block (so that they cost
// one cache line), and taken off them when released. A counter holds the
// sum, over the places added to it and not yet taken off, of their number:
// every term is positive, so a counter is never below the places held by
// any key that maps to it, and the smallest of a key's three counters, its
// estimate, is never below what the key holds. Collisions only make a key
// look busier than it is. (A conservative update, which raises only the
// smallest counters, would be tighter, but it cannot take places back: a
// counter it left alone would be lowered by a release it never counted.)
//
// Acquiring n places adds n to each of the key's three counters, then reads
// them again, and keeps the places only if the smallest it read, the key's
// estimate with them, is at most the limit; otherwise it takes the three
// adds back and refuses. Every step is an atomic operation on one counter;
// there is no lock. The proof that no key holds more than its limit: say
// that at some moment the acquisitions of one key that were allowed and
// are not yet released, S, hold more than the limit between them. Take Z,
// the one of S whose last add came last. Every other member of S had added
// to all its counters before Z's last add, so before Z read them, and none
// of them was released before Z decided (they are held at a moment after
// it). Every counter Z read thus held all of S's places, more than the
// limit, and Z was refused: a contradiction. (Reading the values the adds
// returned, instead of reading again after the last add, would not do: two
// acquirers of one key whose adds interleave, one first on a counter and
// the other first on the next, each see the other on one counter only, and
// both are let in.) The limit is the one in force: places held when
// Set lowers it count against the new one.
//
// What the sketch costs is refusals, never admissions: a key is refused
// early when other keys in flight fill all three of its counters, or while
// a refused acquisition of a colliding key has its adds not yet taken back.
// With as many keys in flight as the limiter was sized for, each holding
// one place, a key with no place held is refused for its first with
// probability about 0.9% when the limit is 1 (another key's place on each of
// its three counters is enough), and 0.001-0.006% when the limit is 2 (it
// takes two on each); with twice the keys in flight, 2.5% and 0.03%
// (TestKeyedConcurrencyRefusesFewColdKeys measures them). A key holding x
// places is refused early only if each of its counters holds limit-x places
// of others. A larger sizing lowers the rates at least in proportion.
//
// Keys with overrides are counted exactly, each in a counter of its own,
// which is never shared: a compare-and-swap that allows and counts in one
// step, as Concurrency does. Keys are told apart by their seeded 64-bit
// hash, and a key matching an override's hash is compared with it in full,
// so no key is taken for an overridden one.

// A keyConcurrency is the state of a Concurrency limiter per key: a
// sketch sized for the keys in flight at once, and an exact count per
// override. It takes no lock, and acquiring and releasing allocate nothing.
type keyConcurrency struct {
	seed maphash.Seed
	mask uint64 // blocks - 1
	// cells holds the sketch: block b's counters at [8b, 8b+8), one cache
	// line (the slice's length is a power of two of at least 4 KiB, which
	// the allocator aligns to it).
	cells []atomic.Int64
	// limits are the limits in force, swapped whole (see concLimits).
	limits atomic.Pointer[concLimits]
	mu     sync.Mutex // serializes set
}

// concLimits are the limits of a keyConcurrency: the limit of the keys
// without overrides, and the overrides. How a key's places follow it when
// Set gives it an override or takes its override away (see pinTable):
//
//   - An entry is sealed by moving what it holds into the key's counters in
//     the sketch (added there first, then the entry swapped to sealed, the
//     add taken back and tried again if the entry changed meanwhile). A
//     permit of a sealed entry gives its places back to the sketch. An
//     acquisition that finds its key's entry sealed decides in the sketch,
//     as the limits that seal it will have it.
//   - A new entry carries the key's estimate in the sketch, which is at
//     least what the key holds there, into its decisions, until it reads 0
//     there: from then on the key holds nothing in the sketch, for it takes
//     nothing there while it has the entry.
//   - An acquisition in the sketch checks, once counted, that the limits it
//     decided under are still those in force, and otherwise takes its count
//     back and decides again. So every count it keeps in the sketch was made
//     before the next limits were put in force, and every decision under
//     those limits reads it.
//
// The proof that no key holds more than its limit is then the sketch's
// proof for the places the key holds in the sketch, plus what its entry
// holds or carries.
type concLimits struct {
	limit int64
	pins  pinTable[pinnedCount]
}

// A pinnedCount is the exact count of a key with an override, alone in its
// cache line.
type pinnedCount struct {
	// inflight is the places the key holds here; once the key lost its
	// override and its places moved to the sketch, it is sealedCount, less
	// what permits have released since, which they release in the sketch.
	inflight atomic.Int64
	// carry says that the key may hold places in the sketch, taken before
	// it had its override, which count against its limit.
	carry atomic.Bool
	_     [64 - 12]byte
}

// sealedCount is the count of a sealed entry: negative, as no other count
// is, and far enough from 0 that releases never bring it back.
const sealedCount = math.MinInt64 / 2

const (
	concBlockCounters = 8  // 8-byte counters in a 64-byte block
	concBlocksPerKey  = 4  // sketch blocks per key sized for: 256 bytes
	concCombos        = 56 // the ways to pick keyProbes counters of 8
	keyProbes         = 3  // counters per key, in both sketches
	minKeyBlocks      = 64 // 4 KiB: every power of two from here is line aligned
	keyBlockBytes     = 64
)

// concProbes lists every choice of keyProbes distinct counters of a
// block's 8: a key's hash picks one.
var concProbes = choose3(concBlockCounters)

// choose3 returns every choice of 3 distinct numbers below w, in order.
func choose3(w uint8) [][keyProbes]uint8 {
	var ps [][keyProbes]uint8
	for a := range w {
		for b := a + 1; b < w; b++ {
			for c := b + 1; c < w; c++ {
				ps = append(ps, [keyProbes]uint8{a, b, c})
			}
		}
	}
	return ps
}

// sketchBlocks returns the blocks of a sketch for the given keys and
// blocks per key: a power of two, at least minKeyBlocks.
func sketchBlocksFor(keys, perKey int) int {
	return max(minKeyBlocks, 1<<bits.Len(uint(keys*perKey-1)))
}

// checkKeys returns the keys a keyed limiter is sized for, or the error of
// a count outside [0, flowlimits.MaxKeysInFlight].
func checkKeys(keys int) (int, error) {
	if keys < 0 || keys > flowlimits.MaxKeysInFlight {
		return 0, &configError{Pkg: "flow", Field: "keys", Value: keys, Detail: fmt.Sprintf("must be between 0 and %d", flowlimits.MaxKeysInFlight)}
	}
	if keys == 0 {
		keys = flowlimits.DefaultKeysInFlight
	}
	return keys, nil
}

// newKeyConcurrency returns the per-key state of a Concurrency limiter of
// settings s, whose limit NewConcurrency has checked.
func newKeyConcurrency(s ConcurrencySettings) (*keyConcurrency, error) {
	keys, err := checkKeys(s.Keys)
	if err != nil {
		return nil, err
	}
	if err := checkOverrides(s.Overrides); err != nil {
		return nil, err
	}
	blocks := drawFixed(s.KeyMemory, sketchBlocksFor(keys, concBlocksPerKey), minKeyBlocks, keyBlockBytes)
	c := &keyConcurrency{seed: maphash.MakeSeed(), mask: uint64(blocks - 1), cells: make([]atomic.Int64, blocks*concBlockCounters)}
	giveBackWhenGone(c, s.KeyMemory, blocks*keyBlockBytes)
	pins, _ := pinAll(c.seed, s.Overrides, &pinTable[pinnedCount]{}, func() *pinnedCount { return new(pinnedCount) }, nil)
	c.limits.Store(&concLimits{limit: s.Limit, pins: pins})
	return c, nil
}

// done gives back the n places of permit p, in the key's entry or the
// sketch.
func (c *keyConcurrency) done(p *Permit, n int64) {
	if p.pin != nil && p.pin.inflight.Add(-n) >= 0 {
		return
	}
	c.add(p.h, -n) // in the sketch, or its entry sealed: moved there
}

// fill makes p hold n places of key (hash h), in entry e or the sketch.
func (c *keyConcurrency) fill(p *Permit, e *pinnedCount, h uint64, n int64) {
	p.pin, p.h = e, h
	p.fill(byKeyedConcurrency, unsafe.Pointer(c), n)
}

// acquireN is Concurrency.AcquireN per key.
func (c *keyConcurrency) acquireN(p *Permit, key string, n int64) Decision {
	if p == nil {
		return Decision{Reason: ExceedsLimit}
	}
	if n <= 0 {
		return allowed
	}
	l := c.limits.Load()
	h := maphash.String(c.seed, key)
	for ; ; l = c.limits.Load() {
		limit := l.limit
		if s := l.pins.find(h, key); s != nil {
			if n > s.limit {
				return Decision{Reason: ExceedsLimit}
			}
			if d, ok := c.acquirePinned(p, s.e, h, n, s.limit); ok {
				return d
			}
			limit = s.limit // sealed: decide in the sketch
		} else if n > limit {
			return Decision{Reason: ExceedsLimit}
		}
		// In the sketch, in this function: a call here costs as much again
		// as the cache miss on the key's block.
		c.add(h, n)
		// Read again after the last add, not the values the adds returned:
		// see the proof above keyConcurrency.
		if c.estimate(h) > limit {
			c.add(h, -n)
			return Decision{Reason: ConcurrencyLimited}
		}
		if c.limits.Load() != l {
			// Decided under limits no longer in force: take the count back
			// and decide again (see concLimits).
			c.add(h, -n)
			continue
		}
		c.fill(p, nil, h, n)
		return allowed
	}
}

// acquirePinned takes n places in entry e, exactly, at most limit in all
// with what it carries from the sketch (the key's hash h). It reports false,
// having taken nothing, if e is sealed.
func (c *keyConcurrency) acquirePinned(p *Permit, e *pinnedCount, h uint64, n, limit int64) (Decision, bool) {
	for {
		cur := e.inflight.Load()
		if cur < 0 {
			return Decision{}, false // sealed
		}
		held := cur
		if e.carry.Load() {
			est := c.estimate(h)
			if est == 0 {
				e.carry.Store(false) // see concLimits
			}
			held += est
		}
		if held+n > limit {
			return Decision{Reason: ConcurrencyLimited}, true
		}
		if e.inflight.CompareAndSwap(cur, cur+n) {
			c.fill(p, e, h, n)
			return allowed, true
		}
	}
}

// counters returns the indexes of the key's counters (hash h): a block
// picked by the hash's low bits, three of its counters by its high ones.
func (c *keyConcurrency) counters(h uint64) (base uint64, p *[keyProbes]uint8) {
	return (h & c.mask) * concBlockCounters, &concProbes[(h>>32)%concCombos]
}

// add adds d to each of the key's counters.
func (c *keyConcurrency) add(h uint64, d int64) {
	base, p := c.counters(h)
	cells := c.cells[base : base+concBlockCounters]
	for _, o := range p {
		cells[o].Add(d)
	}
}

// estimate returns the smallest of the key's counters: at least the places
// the key holds.
func (c *keyConcurrency) estimate(h uint64) int64 {
	base, p := c.counters(h)
	cells := c.cells[base : base+concBlockCounters]
	return min(cells[p[0]].Load(), cells[p[1]].Load(), cells[p[2]].Load())
}

// inFlight returns the places key holds: exactly for a key with an
// override, otherwise its estimate in the sketch.
func (c *keyConcurrency) inFlight(key string) int64 {
	h := maphash.String(c.seed, key)
	if s := c.limits.Load().pins.find(h, key); s != nil {
		if n := s.e.inflight.Load(); n >= 0 {
			if s.e.carry.Load() {
				n += c.estimate(h)
			}
			return n
		}
	}
	return c.estimate(h)
}

// limitNow returns the most places a key without an override can hold at
// once.
func (c *keyConcurrency) limitNow() int64 { return c.limits.Load().limit }

// limitOf returns the most places key can hold at once: its override's
// limit, or limitNow's.
func (c *keyConcurrency) limitOf(key string) int64 {
	l := c.limits.Load()
	return l.pins.limitOf(c.seed, key, l.limit)
}

// set is Concurrency.Set per key.
func (c *keyConcurrency) set(limit int64, overrides map[string]int64) error {
	if limit < 0 || limit > maxLimit {
		return badLimit(limit, 0)
	}
	if err := checkOverrides(overrides); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.limits.Load()
	if old.pins.same(overrides) {
		l := *old
		l.limit = limit
		c.limits.Store(&l)
		return nil
	}
	carried := func() *pinnedCount {
		e := new(pinnedCount)
		e.carry.Store(true)
		return e
	}
	pins, gone := pinAll(c.seed, overrides, &old.pins, carried, nil)
	for _, s := range gone {
		c.seal(s.e, maphash.String(c.seed, s.key))
	}
	c.limits.Store(&concLimits{limit: limit, pins: pins})
	return nil
}

// seal moves what entry e holds into the sketch, under the key's hash h
// (see concLimits).
func (c *keyConcurrency) seal(e *pinnedCount, h uint64) {
	for {
		n := e.inflight.Load()
		c.add(h, n)
		if e.inflight.CompareAndSwap(n, sealedCount) {
			return
		}
		c.add(h, -n)
	}
}

// bytes returns the heap the limiter takes, which changes only with Set:
// the sketch, the overrides' counts and the limiter itself, beyond the
// overrides' keys.
func (c *keyConcurrency) bytes() int {
	return len(c.cells)*8 + len(c.limits.Load().pins.slots)*pinBytes + 128
}
