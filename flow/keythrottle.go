package flow

import (
	"context"
	"hash/maphash"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/timegrid"
)

// A KeyedThrottle paces each key (a user, a tenant, a client address) as a
// Throttle paces all requests: with a limit of N per interval, the places
// it gives one key are at least interval/N apart (rounded up to the
// nanosecond), and a request waits at most the maximum wait for its place.
// Keys listed in the overrides have limits of their own; a key's pace
// holds whatever the other keys do, however many there are. Throttle's doc
// says what Allow, ReserveN and Wait do; they do it here per key. There is
// no warm-up.
//
// Memory is fixed when the limiter is made and never grows, whatever the
// keys: 64 bytes per block of a sketch sized from the number of keys the
// caller expects to be paced at once, plus about 100 bytes per override.
// How:
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
//
// A KeyedThrottle is safe for concurrent use; deciding takes the mutex of
// the key's block (no other) and allocates nothing. The zero KeyedThrottle
// is not usable; make one with NewKeyedThrottle.
type KeyedThrottle struct {
	seed    maphash.Seed
	limit   int64
	per     uint64 // the interval, in nanoseconds
	maxWait int64
	one     int64 // the pace of one request at limit
	clock   clock.Clock
	mask    uint64 // len(blocks) - 1
	// blocks is the sketch, each block one cache line (a power of two of
	// them, of at least 4 KiB in all, which the allocator aligns to it).
	blocks []paceBlock
	pinned pinIndex
	pins   []pinnedPace
}

// A paceBlock is a cache line of a KeyedThrottle's sketch: six next free
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
	next  atomic.Int64
	limit int64
	one   int64 // the pace of one request at limit; 0 if limit is 0
	key   string
	_     [24]byte
}

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

// NewKeyedThrottle returns a limiter pacing each key at limit requests per
// interval, one every interval/limit, and each key of overrides at the
// limit given for it, a reserved place being at most maxWait away. keys is
// how many distinct keys the caller expects to be paced at once, those
// given a place within one pace of now (DefaultKeysInFlight if 0): the
// sketch takes 512 bytes per key, rounded up to a power of two, from 4 KiB;
// more keys than that are still paced, but wait for others more often.
//
// limit must be in [1, MaxLimit], each override in [0, MaxLimit] (0 blocks
// the key), the interval positive and at most 36 years, maxWait at least 0
// (0 blocks every reservation that would have to wait; waits beyond 36
// years count as that long), and keys in [0, MaxKeysInFlight]. It takes
// the Options WithClock and WithKeyMemory, from whose budget the sketch
// takes what it has, halved down to 4 KiB if short. A bad argument or
// Option is a *ConfigError
// naming it: "limit", "interval", "max_wait", "overrides" (with the key),
// "keys", "buckets" or "warm_up".
func NewKeyedThrottle(limit int64, interval, maxWait time.Duration, overrides map[string]int64, keys int, opts ...Option) (*KeyedThrottle, error) {
	if err := checkPace(limit, interval, maxWait); err != nil {
		return nil, err
	}
	keys, err := checkKeys(keys)
	if err != nil {
		return nil, err
	}
	o, err := buildKeyedOptions(opts)
	if err != nil {
		return nil, err
	}
	if o.bucketsGiven {
		return nil, &ConfigError{Option: "buckets", Value: o.buckets, Detail: "a keyed throttle has no buckets"}
	}
	if o.warming {
		return nil, &ConfigError{Option: "warm_up", Value: o.warmUp, Detail: "a keyed throttle does not warm up"}
	}
	pinned, seed, index, err := pinOverrides(overrides, 0)
	if err != nil {
		return nil, err
	}
	blocks := drawFixed(o.memory, sketchBlocksFor(keys, paceBlocksPerKey), minKeyBlocks, keyBlockBytes)
	t := &KeyedThrottle{
		seed: seed, limit: limit, per: uint64(interval), maxWait: int64(min(maxWait, timegrid.MaxTime)),
		clock: o.clock, mask: uint64(blocks - 1), blocks: make([]paceBlock, blocks), pinned: index,
	}
	giveBackWhenGone(t, o.memory, blocks*keyBlockBytes)
	t.one = paceCost(1, limit, t.per)
	if len(pinned) > 0 {
		t.pins = make([]pinnedPace, len(pinned))
		for i, key := range pinned {
			e := &t.pins[i]
			e.key, e.limit = key, overrides[key]
			if e.limit > 0 {
				e.one = paceCost(1, e.limit, t.per)
			}
			e.next.Store(-1 << 62) // long before any time: the first request goes at once
		}
	}
	return t, nil
}

// paceCost returns the time n places take at limit per interval per
// nanoseconds: ceil(n × per / limit), exactly, for n in [1, limit]; it is
// at most per. The product takes 128 bits, so no rate overflows or rounds
// to nothing: MaxLimit per nanosecond is one place per nanosecond, and one
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

// A KeyReservation is a place given by a KeyedThrottle. Its Decision says
// whether it was given and how long to wait for it. It keeps what giving
// the place back needs, not the key. The zero KeyReservation holds no
// place, and cancelling it does nothing.
type KeyReservation struct {
	Decision
	t      *KeyedThrottle
	h      uint64 // the key's hash: its block and counters
	writes uint64 // the block's writes with this reservation's
	start  int64  // the place
	pin    int32  // the override's entry, or -1 for the sketch
	// old holds the key's counters before the reservation; for a key with
	// an override, its next free place before and after.
	old [keyProbes]int64
}

// Cancel gives the place back if it can (see KeyedThrottle: if no other
// place was given in its block since, or, for a key with an override, if
// it is still the key's last) and it has not yet come, and reports whether
// it did. Cancelling twice, or cancelling a blocked reservation, does
// nothing. Cancel through one KeyReservation value only, as for a
// Throttle's Reservation.
func (r *KeyReservation) Cancel() bool {
	if r.t == nil {
		return false
	}
	return r.CancelAt(r.t.clock.Now())
}

// CancelAt is Cancel at time now.
func (r *KeyReservation) CancelAt(now int64) bool {
	if r.t == nil || !r.Allowed || r.start <= now {
		return false
	}
	if r.pin >= 0 {
		if !r.t.pins[r.pin].next.CompareAndSwap(r.old[1], r.old[0]) {
			return false
		}
		r.t = nil
		return true
	}
	b, p := r.t.counters(r.h)
	b.mu.Lock()
	back := b.writes == r.writes
	if back {
		for j, o := range p {
			b.next[o] = r.old[j]
		}
		b.writes++
	}
	b.mu.Unlock()
	if back {
		r.t = nil
	}
	return back
}

// counters returns the key's block (hash h, its low bits) and which three
// of its counters (its high bits) are the key's.
func (t *KeyedThrottle) counters(h uint64) (*paceBlock, *[keyProbes]uint8) {
	return &t.blocks[h&t.mask], &paceProbes[(h>>32)%paceCombos]
}

// pin returns the entry of key (hash h) if it has an override.
func (t *KeyedThrottle) pin(h uint64, key string) (int32, bool) {
	if t.pinned == nil {
		return 0, false
	}
	i, ok := t.pinned[h]
	return i, ok && t.pins[i].key == key
}

// ReserveN reserves places for n requests of key now. See ReserveNAt.
func (t *KeyedThrottle) ReserveN(key string, n int64) KeyReservation {
	return t.ReserveNAt(t.clock.Now(), key, n)
}

// ReserveNAt reserves places for n requests of key arriving at time now:
// all n, next to each other, or none. The Decision says how long to wait
// for the first place, at most the maximum wait; a place further away is
// blocked with WaitTooLong, RetryAfter being how much further. n <= 0 is
// allowed at once and takes nothing; n above the key's limit is blocked
// with ExceedsLimit.
func (t *KeyedThrottle) ReserveNAt(now int64, key string, n int64) KeyReservation {
	return t.reserve(now, key, n, t.maxWait)
}

// reserve takes places for n requests of key arriving at now if the first
// is at most maxWait away.
func (t *KeyedThrottle) reserve(now int64, key string, n, maxWait int64) KeyReservation {
	if n <= 0 {
		return KeyReservation{Decision: allowed}
	}
	now = timegrid.Clamp(now)
	h := maphash.String(t.seed, key)
	if i, ok := t.pin(h, key); ok {
		return t.reservePinned(now, i, n, maxWait)
	}
	if n > t.limit {
		return KeyReservation{Decision: Decision{Reason: ExceedsLimit}}
	}
	cost := t.one
	if n != 1 {
		cost = paceCost(n, t.limit, t.per)
	}
	b, p := t.counters(h)
	b.mu.Lock()
	est := min(b.next[p[0]], b.next[p[1]], b.next[p[2]]) - paceBias
	start := max(est, now)
	if wait := start - now; wait > maxWait {
		b.mu.Unlock()
		return KeyReservation{Decision: Decision{Reason: WaitTooLong, RetryAfter: time.Duration(wait - maxWait)}}
	}
	r := KeyReservation{Decision: Decision{Allowed: true, Wait: time.Duration(start - now)}, t: t, h: h, start: start, pin: -1}
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

// reservePinned is reserve for override i, exactly, as a Throttle decides.
func (t *KeyedThrottle) reservePinned(now int64, i int32, n, maxWait int64) KeyReservation {
	e := &t.pins[i]
	if n > e.limit {
		return KeyReservation{Decision: Decision{Reason: ExceedsLimit}}
	}
	cost := e.one
	if n != 1 {
		cost = paceCost(n, e.limit, t.per)
	}
	for {
		prev := e.next.Load()
		start := max(prev, now)
		if wait := start - now; wait > maxWait {
			return KeyReservation{Decision: Decision{Reason: WaitTooLong, RetryAfter: time.Duration(wait - maxWait)}}
		}
		if e.next.CompareAndSwap(prev, start+cost) {
			return KeyReservation{Decision: Decision{Allowed: true, Wait: time.Duration(start - now)}, t: t, start: start, pin: i, old: [keyProbes]int64{prev, start + cost}}
		}
	}
}

// Allow decides whether one request of key may proceed now. See AllowNAt.
func (t *KeyedThrottle) Allow(key string) Decision { return t.AllowNAt(t.clock.Now(), key, 1) }

// AllowN decides whether n requests of key may proceed now. See AllowNAt.
func (t *KeyedThrottle) AllowN(key string, n int64) Decision {
	return t.AllowNAt(t.clock.Now(), key, n)
}

// AllowNAt decides whether n requests of key arriving at time now may
// proceed at once, and if so takes their places: all n, next to each other,
// or none. They are allowed only if the key's next free place is now,
// whatever the maximum wait, so an allowed Decision's Wait is 0; otherwise
// they are blocked with RateLimited, and RetryAfter says how long until
// that place comes. n <= 0 is allowed and takes nothing; n above the key's
// limit is blocked with ExceedsLimit.
func (t *KeyedThrottle) AllowNAt(now int64, key string, n int64) Decision {
	d := t.reserve(now, key, n, 0).Decision
	if d.Reason == WaitTooLong {
		d.Reason = RateLimited
	}
	return d
}

// Wait waits for a place for one request of key now. See WaitNAt.
func (t *KeyedThrottle) Wait(ctx context.Context, key string) error {
	return t.WaitNAt(ctx, t.clock.Now(), key, 1)
}

// WaitN waits for places for n requests of key now. See WaitNAt.
func (t *KeyedThrottle) WaitN(ctx context.Context, key string, n int64) error {
	return t.WaitNAt(ctx, t.clock.Now(), key, n)
}

// WaitNAt reserves places for n requests of key arriving at time now, as
// ReserveNAt does, and waits for the first, on the throttle's clock, as
// Throttle.WaitNAt does. It returns nil when the requests may proceed; a
// *BlockError when they were blocked (their place would be further away
// than the maximum wait, or than ctx's deadline, which is real time
// whatever the throttle's clock, or n exceeds the key's limit); or
// ctx.Err() if ctx is done first, in which case the place is given back if
// Cancel can.
func (t *KeyedThrottle) WaitNAt(ctx context.Context, now int64, key string, n int64) error {
	maxWait, err := waitBudget(ctx, t.maxWait)
	if err != nil {
		return err
	}
	r := t.reserve(now, key, n, maxWait)
	if !r.Allowed || r.Wait <= 0 {
		return waitRefused(r.Decision, maxWait < t.maxWait)
	}
	if err := clock.Sleep(ctx, t.clock, r.Wait); err != nil {
		r.Cancel()
		return err
	}
	return nil
}

// Limit returns the number of requests per interval of a key without an
// override.
func (t *KeyedThrottle) Limit() int64 { return t.limit }

// LimitOf returns the number of requests per interval of key: its
// override's limit, or Limit.
func (t *KeyedThrottle) LimitOf(key string) int64 {
	if i, ok := t.pin(maphash.String(t.seed, key), key); ok {
		return t.pins[i].limit
	}
	return t.limit
}

// Interval returns the throttle's interval.
func (t *KeyedThrottle) Interval() time.Duration { return time.Duration(t.per) }

// MaxWait returns the longest a request may wait for its place.
func (t *KeyedThrottle) MaxWait() time.Duration { return time.Duration(t.maxWait) }

// Bytes returns the heap the limiter takes, which never changes: the
// sketch, the overrides' places and the limiter itself, beyond the
// overrides' keys.
func (t *KeyedThrottle) Bytes() int {
	return len(t.blocks)*keyBlockBytes + len(t.pins)*pinnedBytes + len(t.pinned)*pinIndexBytes + 160
}
