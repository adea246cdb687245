package flow

import (
	"hash/maphash"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/timegrid"
)

// How a Throttle per key paces keys in fixed memory.
//
// All a key's pacing needs is the time of its next free place: the end of
// the last place it was given. A key whose next free place has passed is
// paced exactly as a key never seen, so only the keys whose next free place
// is still to come (those given a place within one pace of now, or waiting
// for one) need remembering. They are kept in a max-sketch: a key maps to
// three counters, picked by a hash seeded at random per limiter (so that
// no one can pick keys that collide) among the six of one 64-byte block,
// which also holds the block's mutex and its count of writes, so that one
// decision touches one cache line. Each counter holds a next free place,
// the latest of the keys that map to it; a key's estimate is the earliest
// of its three. Counters start long ago, and a key given a place ending at
// t raises each of its counters to at least t, and lowers none.
//
// The proof that no key is given places closer than its pace: every
// counter is at least the next free place of every key that maps to it,
// since a counter only ever rises, and rises to the new next free place
// of the key that raised it. So a key's estimate is at least its next free
// place, its new place starts no sooner than that (or now, if later), and
// a key's places never overlap: each begins no sooner than the one before
// it ends, a pace per request after that one began. The block's mutex
// makes reading the estimate and raising the counters one step for the
// keys of the block, which are the only keys that share counters.
//
// What the sketch costs is waiting, never pace: a key all of whose three
// counters are shared with keys paced ahead waits until the earliest of
// its counters' latest places, and is refused (WaitTooLong) if that is
// beyond the maximum wait. With as many keys paced at once as the limiter
// was sized for, a key not seen for a pace finds its place in the future,
// and must wait, with probability about 0.8%; its wait is then that of a
// busy key of its block, at most the maximum wait and an interval. With
// twice as many keys, about 2%. TestKeyedThrottleColdKeysRarelyWait
// measures these; a larger sizing lowers them about in proportion.
//
// Cancelling a reservation gives its place back only if no other place was
// given in its block since (the block's count of writes says so), and the
// place has not yet come: the block is then put back exactly as it was
// before, as if the reservation had never been made, so the invariant
// above holds of the places not given back. Otherwise the place stays
// taken: a counter raised by the reservation may since carry another key's
// next free place, which lowering it would lose, and the key's next
// request waits as if the cancelled one had gone. So Cancel gives back
// when Throttle would (the key's last place, not yet come), unless another
// key of its block was given a place since.
//
// Keys with overrides are paced exactly, each by a next free place of its
// own, with one compare-and-swap as Throttle does. Keys are told apart by
// their seeded 64-bit hash, and a key matching an override's hash is
// compared with it in full, so no key is taken for an overridden one. A
// key is hashed whole: its length is the caller's to bound.

// A keyThrottle is the state of a Throttle per key: a sketch sized for the
// keys paced at once, and an exact next free place per override. Deciding
// takes the mutex of the key's block, no other, and allocates nothing.
type keyThrottle struct {
	seed    maphash.Seed
	per     uint64 // the interval, in nanoseconds
	maxWait int64
	clock   clock.Clock
	mask    uint64 // len(blocks) - 1
	// blocks is the sketch, each block one cache line (a power of two of
	// them, of at least 4 KiB in all, which the allocator aligns to it).
	blocks []paceBlock
	// limits are the limits in force, swapped whole (see paceLimits).
	limits atomic.Pointer[paceLimits]
	mu     sync.Mutex // serializes Set
}

// paceLimits are the limits of a Throttle per key: the limit of the keys
// without overrides, and the overrides. How a key's next free place
// follows it when Set gives it an override or takes its override away
// (see pinTable):
//
//   - An entry is sealed by swapping its next free place for sealedPace,
//     once the place is kept in frozen, and then raising the key's counters
//     in the sketch to at least that place. A reservation that finds its
//     key's entry sealed decides in the sketch, as the limits that seal it
//     will have it, its place no earlier than frozen.
//   - A new entry carries the key's estimate in the sketch, which is at
//     least the key's next free place there: the first reservation that
//     finds it carried raises the entry's next free place to the
//     estimate, under the block's mutex, before it reserves.
//   - A reservation in the sketch checks, under the block's mutex, that the
//     limits it decides under are still those in force, and otherwise
//     decides again. So every place it gives in the sketch is given under
//     the mutex before the next limits' first reservation of a carried
//     entry reads the block, or it is not given.
//
// Every place of a key thus starts no earlier than the key's next free
// place, wherever that is kept: the invariant of the proof above.
type paceLimits struct {
	limit int64
	one   int64 // the pace of one request at limit
	pins  pinTable[pinnedPace]
}

// A paceBlock is a cache line of a per-key Throttle's sketch: six next free
// places and what guards them.
type paceBlock struct {
	mu sync.Mutex
	// writes counts the block's changes: a reservation can be given back
	// only while it is still the last.
	writes uint64
	// next holds the counters, each a time plus paceBias, so that the
	// zero value is long before any time the throttle is asked about.
	next [paceBlockCounters]int64
}

// A pinnedPace is the exact next free place of a key with an override,
// alone in its cache line.
type pinnedPace struct {
	// next is the key's next free place, or sealedPace once the key lost
	// its override; frozen is then what it was.
	next, frozen atomic.Int64
	// carry says that the key's next free place may be in the sketch,
	// where it was before it had its override.
	carry atomic.Bool
	_     [64 - 20]byte
}

// sealedPace is the next free place of a sealed entry; longAgo that of a new
// one, before any time a throttle is asked about.
const (
	sealedPace = math.MinInt64
	longAgo    = -1 << 62
)

const (
	paceBlockCounters = 6
	paceCombos        = 20 // the ways to pick keyProbes counters of 6
	paceBlocksPerKey  = 8  // sketch blocks per key sized for: 512 bytes
	// paceBias is added to the times in the sketch: times are clamped to
	// [-MaxTime, MaxTime], places are at most a maximum wait and a pace
	// (each at most MaxTime) later, so biased they lie in [0, 4 MaxTime]
	// and never overflow.
	paceBias = timegrid.MaxTime
)

// paceProbes lists every choice of keyProbes distinct counters of a
// block's 6: a key's hash picks one.
var paceProbes = choose3(paceBlockCounters)

// newKeyThrottle returns the per-key state of a throttle of settings s,
// whose pace newThrottle has checked, reading clock c.
func newKeyThrottle(s ThrottleSettings, c clock.Clock) (*keyThrottle, error) {
	keys, err := checkKeys(s.Keys)
	if err != nil {
		return nil, err
	}
	if err := checkOverrides(s.Overrides); err != nil {
		return nil, err
	}
	blocks := drawFixed(s.KeyMemory, sketchBlocksFor(keys, paceBlocksPerKey), minKeyBlocks, keyBlockBytes)
	t := &keyThrottle{
		seed: maphash.MakeSeed(), per: uint64(s.Interval), maxWait: int64(min(s.MaxWait, timegrid.MaxTime)),
		clock: c, mask: uint64(blocks - 1), blocks: make([]paceBlock, blocks),
	}
	giveBackWhenGone(t, s.KeyMemory, blocks*keyBlockBytes)
	t.limits.Store(t.newLimits(s.Limit, s.Overrides, &pinTable[pinnedPace]{}, false))
	return t, nil
}

// newLimits returns the limits of limit and overrides, which are valid,
// each key keeping its entry in old if it has one; new entries carry the
// sketch if carry. It seals the entries of old's keys that lose their
// overrides.
func (t *keyThrottle) newLimits(limit int64, overrides map[string]int64, old *pinTable[pinnedPace], carry bool) *paceLimits {
	fresh := func() *pinnedPace {
		e := new(pinnedPace)
		e.next.Store(longAgo) // the first request goes at once
		e.carry.Store(carry)
		return e
	}
	pace := func(limit int64) int64 { return paceCost(1, limit, t.per) }
	pins, gone := pinAll(t.seed, overrides, old, fresh, pace)
	for _, s := range gone {
		t.seal(s.e, maphash.String(t.seed, s.key))
	}
	return &paceLimits{limit: limit, one: pace(limit), pins: pins}
}

// seal moves entry e's next free place into the sketch, under the key's
// hash h (see paceLimits).
func (t *keyThrottle) seal(e *pinnedPace, h uint64) {
	var v int64
	for {
		v = e.next.Load()
		e.frozen.Store(v)
		if e.next.CompareAndSwap(v, sealedPace) {
			break
		}
	}
	b, p := t.counters(h)
	b.mu.Lock()
	for _, o := range p {
		b.next[o] = max(b.next[o], v+paceBias)
	}
	b.writes++ // no reservation before may be given back over it
	b.mu.Unlock()
}

// set is Throttle.Set for a throttle per key.
func (t *keyThrottle) set(limit int64, overrides map[string]int64) error {
	if err := checkPace(limit, time.Duration(t.per), 0); err != nil {
		return err
	}
	if err := checkOverrides(overrides); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.limits.Load()
	if old.pins.same(overrides) {
		l := *old // the overrides' table is shared: it never changes
		l.limit, l.one = limit, paceCost(1, limit, t.per)
		t.limits.Store(&l)
		return nil
	}
	t.limits.Store(t.newLimits(limit, overrides, &old.pins, true))
	return nil
}

// paceCost returns the time n places take at limit per interval per
// nanoseconds: ceil(n × per / limit), exactly, for n in [1, limit]; it is
// at most per. The product takes 128 bits, so no rate overflows or rounds
// to nothing: 2^32-1 per nanosecond is one place per nanosecond, and one
// per 36 years is 36 years.
func paceCost(n, limit int64, per uint64) int64 {
	hi, lo := bits.Mul64(uint64(n), per)
	// hi < limit, since n <= limit: the quotient fits in 64 bits.
	q, r := bits.Div64(hi, lo, uint64(limit))
	if r != 0 {
		q++
	}
	return int64(q)
}

// giveBack gives back the place of r, in the sketch, if no other place
// was given in its block since, and reports whether it did.
func (t *keyThrottle) giveBack(r *Reservation) bool {
	b, p := t.counters(r.h)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.writes != r.writes {
		return false
	}
	for j, o := range p {
		b.next[o] = r.old[j]
	}
	b.writes++
	return true
}

// counters returns the key's block (hash h, its low bits) and which three
// of its counters (its high bits) are the key's.
func (t *keyThrottle) counters(h uint64) (*paceBlock, *[keyProbes]uint8) {
	return &t.blocks[h&t.mask], &paceProbes[(h>>32)%paceCombos]
}

// reserve takes places for n requests of key arriving at now if the first
// is at most maxWait away.
func (t *keyThrottle) reserve(now int64, key string, n, maxWait int64) Reservation {
	if n <= 0 {
		return Reservation{Decision: allowed}
	}
	now = timegrid.Clamp(now)
	h := maphash.String(t.seed, key)
	for {
		l := t.limits.Load()
		limit, one, floor := l.limit, l.one, int64(longAgo)
		if s := l.pins.find(h, key); s != nil {
			if n > s.limit {
				return Reservation{Decision: Decision{Reason: ExceedsLimit}}
			}
			if r, ok := t.reservePinned(now, s, h, n, maxWait); ok {
				return r
			}
			// Sealed: decide in the sketch, no sooner than the entry's
			// last place ends.
			limit, one, floor = s.limit, s.one, s.e.frozen.Load()
		} else if n > limit {
			return Reservation{Decision: Decision{Reason: ExceedsLimit}}
		}
		cost := one
		if n != 1 {
			cost = paceCost(n, limit, t.per)
		}
		// In the sketch, in this function: a call here costs an eighth of
		// the decision.
		b, p := t.counters(h)
		b.mu.Lock()
		if t.limits.Load() != l {
			b.mu.Unlock() // decided under limits no longer in force: see paceLimits
			continue
		}
		est := min(b.next[p[0]], b.next[p[1]], b.next[p[2]]) - paceBias
		start := max(est, floor, now)
		if wait := start - now; wait > maxWait {
			b.mu.Unlock()
			return Reservation{Decision: Decision{Reason: WaitTooLong, RetryAfter: time.Duration(wait - maxWait)}}
		}
		r := Reservation{Decision: Decision{Allowed: true, Wait: time.Duration(start - now)}, clock: t.clock, kt: t, h: h, start: start}
		end := start + cost + paceBias
		for j, o := range p {
			r.old[j] = b.next[o]
			b.next[o] = max(b.next[o], end)
		}
		b.writes++
		r.writes = b.writes
		b.mu.Unlock()
		return r
	}
}

// reservePinned is reserve for the override of slot s, exactly, as a
// Throttle decides. It reports false, having taken nothing, if the slot's
// entry is sealed.
func (t *keyThrottle) reservePinned(now int64, s *pinSlot[pinnedPace], h uint64, n, maxWait int64) (Reservation, bool) {
	e := s.e
	if e.carry.Load() && !t.uncarry(e, h) {
		return Reservation{}, false
	}
	cost := s.one
	if n != 1 {
		cost = paceCost(n, s.limit, t.per)
	}
	d, prev, start, end, ok := reserveExact(&e.next, now, cost, maxWait)
	if !ok || !d.Allowed {
		return Reservation{Decision: d}, ok
	}
	return Reservation{Decision: d, clock: t.clock, next: &e.next, start: start, old: [keyProbes]int64{prev, end}}, true
}

// uncarry raises the next free place of entry e, which carries the sketch,
// to the key's estimate there (its hash h), and reports false if e is
// sealed.
func (t *keyThrottle) uncarry(e *pinnedPace, h uint64) bool {
	b, p := t.counters(h)
	b.mu.Lock()
	defer b.mu.Unlock()
	est := min(b.next[p[0]], b.next[p[1]], b.next[p[2]]) - paceBias
	for {
		prev := e.next.Load()
		if prev == sealedPace {
			return false
		}
		if prev >= est || e.next.CompareAndSwap(prev, est) {
			e.carry.Store(false)
			return true
		}
	}
}

// limitNow returns the number of requests per interval of a key without
// an override.
func (t *keyThrottle) limitNow() int64 { return t.limits.Load().limit }

// limitOf returns the number of requests per interval of key: its
// override's limit, or limitNow's.
func (t *keyThrottle) limitOf(key string) int64 {
	l := t.limits.Load()
	return l.pins.limitOf(t.seed, key, l.limit)
}

// bytes returns the heap the limiter takes, which changes only with Set:
// the sketch, the overrides' places and the limiter itself, beyond the
// overrides' keys.
func (t *keyThrottle) bytes() int {
	return len(t.blocks)*keyBlockBytes + len(t.limits.Load().pins.slots)*pinBytes + 160
}
