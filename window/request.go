package window

import (
	"github.com/slidegate/slidegate/internal/windowhook"
)

// A request's counts. A guard counts each request twice in its resource's
// Counter: the request allowed when it enters, its outcome and response time
// when it exits. Found the usual way, each finds its bucket: the time's
// bucket index (a multiplication), its slot (another, for a ring of n
// buckets not a power of two), the stripe, the slot's state word. Most
// requests end in the bucket they began in, so enterAt returns the bucket
// and slot it counted in, the request keeps them, and exitAt takes them back:
// it checks with one comparison that the exit's time still falls in that
// bucket, and looks the bucket up only when it does not. A request that ends
// in a later bucket than it began counts its outcome in the later one, as
// AddPairAt would.
//
// The mark is a hint, never trusted beyond that check: a bucket index holds
// a time only if the time falls in it, which the check computes from the
// ring's grid, and the slot is the one slotOf gives for the index. Stripes
// added between the two are picked anew by exitAt, as any writer picks.

func init() {
	windowhook.EnterAt = (*Counter).enterAt
	windowhook.ExitAt = (*Counter).exitAt
}

// enterAt adds v to summed event e at time now, as AddAt does, and returns
// the bucket and slot it added to, for exitAt. For an event not summed, or
// not recorded, it is AddAt, and returns bucket 0, which holds no time. Its fast
// path is addIn's, written out, with pick's: one call fewer each.
func (c *Counter) enterAt(now int64, e Event, v int64) (uint64, int) {
	if e >= MinRT || c.word[e] < 0 {
		c.AddAt(now, e, v)
		return 0, 0
	}
	r, i := c.r, int(c.word[e])
	b := r.bucketOf(now)
	s := r.slotOf(b)
	ws := r.words
	if m := r.more.Load(); m != nil {
		ws = (*m)[hint()&(len(*m)-1)]
	}
	if ws[s].Load() == b<<1 && v >= minValue && v <= maxValue {
		w := &ws[s+1+i]
		old := w.Load()
		if nw := old + uint64(v); belongs(old, b) && belongs(nw, b) {
			if w.CompareAndSwap(old, nw) {
				return b, s
			}
			r.contended()
		}
	}
	r.writeSlot(ws, b, s, i, clampValue(v))
	return b, s
}

// exitAt adds v1 to summed event e1 and v2 to summed event e2 at time now,
// as AddPairAt does. b and s are what enterAt returned for the same
// request: when now falls in bucket b, it adds there without looking the
// bucket up. It reports whether both values were recorded. Its fast path
// checks the slot's state word once for both words.
func (c *Counter) exitAt(b uint64, s int, now int64, e1 Event, v1 int64, e2 Event, v2 int64) bool {
	i1, i2 := c.sumWord(e1), c.sumWord(e2)
	if i1 < 0 || i2 < 0 || i1 == i2 {
		return c.AddPairAt(now, e1, v1, e2, v2)
	}
	r := c.r
	if b == 0 || uint64(now-r.startOf(b)) >= uint64(r.width) {
		b = r.bucketOf(now)
		s = r.slotOf(b)
	}
	ws := r.words
	if m := r.more.Load(); m != nil {
		ws = (*m)[hint()&(len(*m)-1)]
	}
	if ws[s].Load() == b<<1 && v1 >= minValue && v1 <= maxValue && v2 >= minValue && v2 <= maxValue {
		w1, w2 := &ws[s+1+i1], &ws[s+1+i2]
		o1, o2 := w1.Load(), w2.Load()
		n1, n2 := o1+uint64(v1), o2+uint64(v2)
		if belongs(o1, b) && belongs(n1, b) && belongs(o2, b) && belongs(n2, b) {
			if !w1.CompareAndSwap(o1, n1) {
				r.contended()
				ok1 := r.addIn(ws, b, s, i1, v1)
				return r.addIn(ws, b, s, i2, v2) && ok1
			}
			if w2.CompareAndSwap(o2, n2) {
				return true
			}
			r.contended()
			return r.addIn(ws, b, s, i2, v2)
		}
	}
	ok1 := r.addIn(ws, b, s, i1, v1)
	return r.addIn(ws, b, s, i2, v2) && ok1
}
