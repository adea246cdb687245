package flow

import (
	"hash/maphash"
	"math"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/slidegate/slidegate/internal/stripe"
)

// fairLanes is how many lanes a fair limit spreads the keys of its requests
// over.
const fairLanes = 64

// A fairShare shares a concurrency limit among the keys of the requests it
// admits (routes, clients), the way Netflix's partitioned limiters and
// Kubernetes' API Priority and Fairness do, without a queue: while fewer
// requests than the limit are in flight, any key may take a place; at the
// limit, a key is still admitted while it holds less than its fair share,
// the limit divided by the keys that hold places. So a key that filled the
// limit while it was alone (a client whose uploads trickle in, a route
// whose handler stalls) keeps what it holds but gets no more while the
// others come in for theirs, and its places go to them as its requests end.
// No key is ever refused for another's sake below its share.
//
// Keys are counted in lanes, not one by one, so that the memory is fixed
// whatever clients send: a key hashes, with a seed of the limiter's, to two
// of 64 lanes and joins the one with fewer requests in flight (shuffle
// sharding, as API Priority and Fairness deals hands of queues). A heavy
// key fills its two lanes; another key shares its fate only if both its
// lanes are those two, one chance in 2,016 for a given pair of keys. The
// share is counted per lane: the limit divided by the lanes that hold
// requests, rounded up, with the request's own lane counted if it is empty.
//
// What the share costs: in flight may go over the limit, by the places that
// keys below their share take there, never over twice the limit; and only
// while some key holds more than its share. Counting the lanes costs each
// request one hash and two atomic adds. The busy lanes are counted only at
// the limit, where a request would otherwise be refused, and at most once
// a millisecond: a count a millisecond old can only make a share a little
// larger or smaller for that millisecond.
//
// Under contention on four processors or more (see cellsFromProcs), the
// counts are kept per processor, so that a request
// that comes and goes on one processor writes only lines of its own: the
// requests in flight in a placePool (its free places, a share of the
// limit, wait in each processor's cell), and the lanes in a stripe of
// counts per processor, which the share's reads add up. A request then
// joins the less busy of its lanes as its own processor counted them, a
// near choice; at the limit, where the share is judged, it chooses by the
// sums. In flight past the limit, no cell keeps a free place (see
// placePool.acquireOver).
type fairShare struct {
	seed maphash.Seed
	pool placePool // the requests in flight, of every lane; past the limit too
	// active is how many lanes held requests at countedAt.
	active, countedAt atomic.Int64
	_                 [64]byte // the lanes written on lines of their own
	lanes             laneCounts
	stripes           stripe.Set[laneCounts] // the lanes per processor, lanes first, once the pool is contended
}

// laneCounts are the requests in flight of each lane (of one processor's,
// striped: the sums of every processor's are the lanes').
type laneCounts [fairLanes]atomic.Int64

// recount is how long a count of the busy lanes serves.
const recount = int64(time.Millisecond)

// fairSpare keeps the free places of a fair share's cells within an
// eighth of its limit, so that what an adaptive limit reads of the places
// taken (its peak in flight) is within an eighth of it.
const fairSpare = 8

// noCap is a limit in flight that is never reached: a shedder's, while the
// CPU is cool.
const noCap = 1 << 36

// newFairShare returns a fairShare with a random seed.
func newFairShare() *fairShare {
	f := &fairShare{seed: maphash.MakeSeed()}
	f.pool.spare = fairSpare
	f.countedAt.Store(math.MinInt64) // never
	return f
}

// A pick is the lane a request joins, and what it and the key's other lane
// held when the request came.
type pick struct {
	lane, other     uint8
	held, otherHeld int64
	// cell is the caller's processor's index (0 until the lanes have
	// stripes), which admit takes places with and the permit gives them
	// back to.
	cell uint8
}

// pick returns the lane a request of key joins: the less busy of the two
// lanes the key hashes to, as the caller's processor counted them.
func (f *fairShare) pick(key string) pick {
	a, b := f.lanesOf(key)
	if all := f.stripes.Stripes(); all != nil {
		h := stripe.Hint()
		ls := all[h&(len(all)-1)]
		p := choose(a, b, ls[a].Load(), ls[b].Load())
		p.cell = uint8(h % stripe.Max)
		return p
	}
	return choose(a, b, f.lanes[a].Load(), f.lanes[b].Load())
}

// choose returns the pick of the less busy of lanes a and b, holding na and
// nb.
func choose(a, b uint8, na, nb int64) pick {
	if nb < na {
		return pick{lane: b, other: a, held: nb, otherHeld: na}
	}
	return pick{lane: a, other: b, held: na, otherHeld: nb}
}

// laneHeld returns the requests in flight of lane l: exact with one caller at a
// time.
func (f *fairShare) laneHeld(l uint8) int64 {
	all := f.stripes.Stripes()
	if all == nil {
		return f.lanes[l].Load()
	}
	n := int64(0)
	for _, ls := range all {
		n += ls[l].Load()
	}
	return n
}

// inFlight returns the requests in flight, of every lane.
func (f *fairShare) inFlight() int64 { return f.pool.held() }

// lanesOf returns the two lanes of key.
func (f *fairShare) lanesOf(key string) (a, b uint8) {
	h := maphash.String(f.seed, key)
	a, b = uint8(h%fairLanes), uint8(h/fairLanes%fairLanes)
	if b == a {
		b = (a + 1) % fairLanes
	}
	return a, b
}

// underShare reports whether p's lane is below its share of limit at time
// now, and some other key holds places to share with: a key alone at the
// limit (its two lanes the only busy ones) gets no more, whatever its
// lanes hold.
func (f *fairShare) underShare(now int64, p pick, limit int64) bool {
	if at := f.countedAt.Load(); at == math.MinInt64 || now-at >= recount || now < at {
		n := int64(0)
		for i := range uint8(fairLanes) {
			if f.laneHeld(i) > 0 {
				n++
			}
		}
		f.active.Store(n)
		f.countedAt.Store(now)
	}
	busy, own := f.active.Load(), int64(0)
	if p.held > 0 {
		own++
	}
	if p.otherHeld > 0 {
		own++
	}
	if busy <= own {
		return false // no other key to share with
	}
	if p.held == 0 {
		busy++ // its own lane, which the request makes busy
	}
	return p.held*busy < limit // held < ⌈limit/busy⌉
}

// admit takes a place in flight for a request picked p at time now: at
// once while fewer than limit are in flight, and at the limit only while
// its lane is below its share and fewer than twice the limit are in
// flight. It reports whether it took one, and p's lane is then the one
// the request joined.
func (f *fairShare) admit(now int64, limit int64, p *pick) bool {
	pl := &f.pool
	if pl.limit.Load() != limit {
		pl.set(limit) // a new limit, or a shedder's new bound: once per change
	}
	// The pool word alone until it is contended (placePool.acquireSlow),
	// and the lanes with it (the stripes are made only once the cells are).
	var ok bool
	if pl.cells.Load() == nil {
		var mark byte
		pl.note(uintptr(unsafe.Pointer(&mark)))
		w := pl.word.Load()
		if int64(w&takenMask) < limit && pl.word.CompareAndSwap(w, w+1) {
			f.lanes[p.lane].Add(1)
			return true
		}
		if int64(w&takenMask) >= limit && pl.cells.Load() == nil {
			return f.admitPast(now, limit, p)
		}
		var h int
		ok, h = pl.acquireSlow(1)
		p.cell = uint8(h % stripe.Max)
	} else {
		ok = pl.acquireOn(int(p.cell), 1)
	}
	if !ok {
		return f.admitPast(now, limit, p)
	}
	f.join(p.lane, p.cell)
	return true
}

// admitPast is admit at the limit: p's lane below its share.
func (f *fairShare) admitPast(now int64, limit int64, p *pick) bool {
	if f.stripes.Stripes() != nil { // the share is judged by the sums
		cell := p.cell
		*p = choose(p.lane, p.other, f.laneHeld(p.lane), f.laneHeld(p.other))
		p.cell = cell
	}
	if f.pool.taken() >= 2*limit || !f.underShare(now, *p, limit) || !f.pool.acquireOver(1, 2*limit) {
		return false
	}
	f.join(p.lane, p.cell)
	return true
}

// join counts a request admitted in its lane, on the stripe of processor
// cell once the pool has found contention.
func (f *fairShare) join(lane, cell uint8) {
	all := f.stripes.Stripes()
	if all == nil && f.pool.cells.Load() != nil {
		f.grow()
		all = f.stripes.Stripes()
	}
	if all == nil {
		f.lanes[lane].Add(1)
		return
	}
	all[int(cell)&(len(all)-1)][lane].Add(1)
}

// grow makes the stripes of the lanes, once.
func (f *fairShare) grow() {
	f.stripes.Grow(&f.lanes, stripe.Count(), func() *laneCounts { return new(laneCounts) })
}

// leaveStriped is leave once the pool has its cells (the lanes may not
// have their stripes yet: then the lanes are the only stripe).
//
//go:noinline
func (f *fairShare) leaveStriped(cs *poolCells, lane, cell uint8) {
	ls := &f.lanes
	if all := f.stripes.Stripes(); all != nil {
		ls = all[int(cell)&(len(all)-1)]
	}
	ls[lane].Add(-1)
	f.pool.releaseTo(cs, int(cell), 1)
}

// leave takes a request of the given lane, admitted by processor cell,
// out of flight.
func (f *fairShare) leave(lane, cell uint8) {
	if cs := f.pool.cells.Load(); cs != nil {
		f.leaveStriped(cs, lane, cell)
		return
	}
	f.lanes[lane%fairLanes].Add(-1)
	f.pool.word.Add(^uint64(0)) // until the pool is contended (placePool.releaseTo)
}
