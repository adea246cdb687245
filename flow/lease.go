package flow

import (
	"runtime"
	"sync/atomic"

	"github.com/slidegate/slidegate/internal/stripe"
)

// leases are the lease cells of a QPS limiter whose callers have collided on
// a count word: the LongAdder idea applied to an exact admission. Counting
// every allowed request with a compare-and-swap on the open bucket's count
// word makes that word's cache line travel between the cores on every
// request; with leases, a request takes a batch of places from the exact
// window for its processor's cell, and the next requests on that processor
// take theirs from the cell, whose line stays in their core's cache.
//
// A cell is a word on a cache line of its own, one per processor
// (stripe.Count cells, picked by stripe.Hint). It is laid out as a count
// word: a bucket's tag, a sealed bit, then a claimed bit and the places the
// cell holds for the bucket (31 bits). Places in a cell were taken from the
// window: they are counted in the bucket of the cell's tag from the moment
// they are leased, so using one is a request allowed in that bucket, and the
// bound holds exactly as without leases.
//
// The protocol, for the open bucket ob and the next bucket bn:
//
//   - Using places: a request whose time falls in ob, or earlier, takes n
//     places from its cell with one compare-and-swap if the cell holds ob,
//     unsealed, with at least n places. It writes nothing shared, and is
//     counted in ob. A request whose time falls later opens its bucket, as
//     without leases.
//   - Taking a lease: otherwise the request decides on ob's count word as
//     without leases, and, if the room the window would still have after it
//     is worth sharing, first claims its cell for ob: a compare-and-swap
//     setting the claimed bit, keeping the places the cell holds for ob, or
//     replacing an older bucket's cell with ob's, holding none. Its
//     compare-and-swap on the count word then takes n places for itself and
//     L = min(maxLease, room / (2 × cells)) for the cell, and it releases the
//     claim, adding L to the cell. Near the limit L is 0, and the request is
//     exactly one of a limiter without leases.
//   - Giving back: the caller that opens bn first seals ob's count word and
//     wins the open word (see QPS.advance). Then, alone, it seals every cell
//     holding ob, waits for the claim on any of them to be released, and
//     subtracts the places they still hold from ob's count word before it
//     sums bn's base. So every later sum counts only the places used, and
//     the places leased and not used are back in the window one bucket width
//     after they were taken, at the latest.
//
// Invariants, and why they hold:
//
//   - Every place a cell holds for ob unsealed is counted in ob's count word:
//     a lease is added to the cell only after the compare-and-swap that
//     counted it.
//   - A place taken for a cell is used or given back, exactly once. The
//     claim comes before the compare-and-swap on the count word; that lands,
//     if at all, before ob's count word is sealed, which comes before the
//     give-back. So the give-back finds the claim, set or already released,
//     and reads the cell only once it is released, with the lease added if
//     the compare-and-swap landed. A claim set after the give-back passed the
//     cell belongs to a request whose compare-and-swap on the sealed count
//     word fails: it is released with nothing. Only the winner of the open
//     word gives back, so no place is given back twice.
//   - No place is used after it was given back: the give-back seals the cell
//     first, and a compare-and-swap on a sealed cell fails. A request that
//     read its cell, stalled, and comes back after the seal decides on the
//     slow path, which waits for bn.
//   - A cell never holds places for a bucket that has closed unsealed, and a
//     claim never overwrites a later bucket's cell: a claim replaces an older
//     bucket's cell only if ob is still open after the claimer read the cell
//     (a tag is written only by a caller that saw its bucket open, and the
//     open bucket only moves forward), and the cells an older bucket left
//     unsealed hold nothing (they were claimed after that bucket's give-back,
//     and released with nothing).
//   - Only the claimer releases its claim, and it never waits while holding
//     it: a claimer that finds ob's count word sealed releases the claim
//     before it looks for the next bucket. So the give-back's wait ends as
//     soon as the claimer runs two more compare-and-swaps, the same kind of
//     wait as for a bucket being published.
type leases struct {
	cells []leaseCell
	mask  uint64 // len(cells) - 1
	share int64  // 2 × len(cells): a lease is at most room/share
}

// A leaseCell is one processor's cell, alone on its cache line. The cells
// are one allocation of a multiple of 64 bytes, which the allocator aligns
// to 64 bytes, so no two cells share a line.
type leaseCell struct {
	word atomic.Uint64
	_    [56]byte
}

const (
	// maxLease is the most places a request leases for its cell at once:
	// enough to make the count word's line travel once per hundreds of
	// requests, few enough that a cell holds back little of a high limit.
	maxLease = 256
	// claimedBit, in a cell's word, marks a lease being taken for the cell.
	claimedBit = 1 << (countBits - 1)
	// placesMask takes the places a cell holds from its word.
	placesMask = claimedBit - 1
)

// stripe returns the limiter's lease cells, making them if it has none: one
// per processor, every one sealed and holding no real bucket.
func (q *QPS) stripe() *leases {
	if ls := q.leases.Load(); ls != nil {
		return ls
	}
	n := stripe.Count()
	ls := &leases{cells: make([]leaseCell, n), mask: uint64(n - 1), share: 2 * int64(n)}
	for i := range ls.cells {
		ls.cells[i].word.Store(sealedBit)
	}
	if q.leases.CompareAndSwap(nil, ls) {
		return ls
	}
	return q.leases.Load()
}

// cell returns the word of the calling processor's cell.
func (ls *leases) cell() *atomic.Uint64 {
	return &ls.cells[uint64(stripe.Hint())&ls.mask].word
}

// decideLeasing is decide for a limiter with lease cells, c being the
// caller's.
func (q *QPS) decideLeasing(ls *leases, c *atomic.Uint64, now int64, bn uint64, n int64) (Decision, uint64) {
	if o := q.open.Load(); o&1 != 0 && bn <= o>>1 {
		ob := o >> 1
		for v := c.Load(); holds(v, ob) && v&sealedBit == 0 && int64(v&placesMask) >= n; v = c.Load() {
			if c.CompareAndSwap(v, v-uint64(n)) {
				return allowed, ob
			}
		}
	}
	for {
		ob, w := q.openCount(bn)
		slot := &q.slots[ob&q.mask]
		held, claimed := int64(0), false
		for ; holds(w, ob) && w&sealedBit == 0; w = slot.Load() {
			base, own, lim := q.base.Load(), int64(w&countMask), q.bucketLimit()
			if base+own+n > lim {
				if claimed {
					release(c, ob, 0)
				}
				return q.blocked(now, ob, base, own, n, lim), 0
			}
			lease := min(maxLease, (lim-base-own-n)/ls.share)
			if lease > 0 && !claimed {
				held, claimed = q.claim(c, ob)
			}
			if !claimed {
				lease = 0
			}
			lease = min(lease, placesMask-held)
			if slot.CompareAndSwap(w, w+uint64(n+lease)) {
				if claimed {
					release(c, ob, lease)
				}
				return allowed, ob
			}
		}
		// ob is closing: let the cell go before waiting for the next bucket.
		if claimed {
			release(c, ob, 0)
		}
	}
}

// claim claims cell c for a lease in the open bucket ob and returns the
// places the cell holds for ob. It fails when the cell is sealed for ob (ob
// is closing), already claimed (by a caller that moved to another processor
// or shares the cell), or ob is no longer open.
func (q *QPS) claim(c *atomic.Uint64, ob uint64) (int64, bool) {
	for {
		v := c.Load()
		next := v | claimedBit
		if !holds(v, ob) {
			// An older bucket's cell, unless ob has closed since: see leases.
			if q.open.Load() != ob<<1|1 {
				return 0, false
			}
			next = ob<<tagShift | claimedBit
		} else if v&(sealedBit|claimedBit) != 0 {
			return 0, false
		}
		if c.CompareAndSwap(v, next) {
			return int64(next & placesMask), true
		}
	}
}

// release releases the claim on cell c for bucket ob, adding lease places.
// It keeps the sealed bit: a give-back waiting for the claim then reads
// the lease with the rest. A cell that no longer holds ob was taken over by
// a later bucket after ob's give-back, which only a claim that took nothing
// can be (see leases).
func release(c *atomic.Uint64, ob uint64, lease int64) {
	for {
		v := c.Load()
		if !holds(v, ob) || v&claimedBit == 0 {
			return
		}
		if c.CompareAndSwap(v, v&^claimedBit+uint64(lease)) {
			return
		}
	}
}

// giveBack seals every cell holding bucket ob, waiting for a claim on one to
// be released, and returns the places they hold: leased, counted in ob, and
// not used. Only the caller that moved the open bucket from ob calls it, once,
// after ob's count word was sealed.
func (ls *leases) giveBack(ob uint64) int64 {
	var back int64
	for i := range ls.cells {
		c := &ls.cells[i].word
		for {
			v := c.Load()
			if !holds(v, ob) {
				break
			}
			if v&sealedBit == 0 {
				if !c.CompareAndSwap(v, v|sealedBit) {
					continue
				}
				v |= sealedBit
			}
			if v&claimedBit != 0 {
				runtime.Gosched() // a lease being taken, two compare-and-swaps from released
				continue
			}
			back += int64(v & placesMask)
			break
		}
	}
	return back
}
