package flow

import (
	"hash/maphash"
	"math"
	"sync/atomic"
	"time"
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
type fairShare struct {
	seed     maphash.Seed
	inflight atomic.Int64 // the requests in flight, of every lane
	// active is how many lanes held requests at countedAt.
	active, countedAt atomic.Int64
	lanes             [fairLanes]atomic.Int64
}

// recount is how long a count of the busy lanes serves.
const recount = int64(time.Millisecond)

// newFairShare returns a fairShare with a random seed.
func newFairShare() *fairShare {
	f := &fairShare{seed: maphash.MakeSeed()}
	f.countedAt.Store(math.MinInt64) // never
	return f
}

// A pick is the lane a request joins, and what it and the key's other lane
// held when the request came.
type pick struct {
	lane            uint8
	held, otherHeld int64
}

// pick returns the lane a request of key joins: the less busy of the two
// lanes the key hashes to.
func (f *fairShare) pick(key string) pick {
	a, b := f.lanesOf(key)
	na, nb := f.lanes[a].Load(), f.lanes[b].Load()
	if nb < na {
		return pick{lane: b, held: nb, otherHeld: na}
	}
	return pick{lane: a, held: na, otherHeld: nb}
}

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
		for i := range f.lanes {
			if f.lanes[i].Load() > 0 {
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
// flight. It reports whether it took one.
func (f *fairShare) admit(now int64, limit int64, p pick) bool {
	checked := false
	for {
		cur := f.inflight.Load()
		if cur >= limit {
			if cur >= 2*limit {
				return false
			}
			if !checked && !f.underShare(now, p, limit) {
				return false
			}
			checked = true // the share does not change in the few tries a race costs
		}
		if f.inflight.CompareAndSwap(cur, cur+1) {
			f.lanes[p.lane].Add(1)
			return true
		}
	}
}

// take counts a request admitted without a limit in flight, in its lane.
func (f *fairShare) take(lane uint8) {
	f.inflight.Add(1)
	f.lanes[lane].Add(1)
}

// leave takes a request of the given lane out of flight.
func (f *fairShare) leave(lane uint8) {
	f.lanes[lane].Add(-1)
	f.inflight.Add(-1)
}
