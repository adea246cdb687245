package window

import "github.com/slidegate/slidegate/internal/windowhook"

func init() { windowhook.SumsAfter = (*Counter).sumsAfter }

// sumsAfter returns every event over the buckets of the interval at time
// now that come after the bucket holding time t, read from the ring as
// SumsAt reads them without the cache. A circuit breaker that shares its
// resource's counter reads it so (see internal/windowhook).
func (c *Counter) sumsAfter(now, t int64) Sums {
	var out Sums
	r := c.r
	for e := range out {
		out[e] = Event(e).kind().empty()
	}
	first, last := r.first(now, c.k), r.bucketOf(now)
	if after := r.bucketOf(t) + 1; after > first {
		first = after
	}
	for b := first; b <= last; b++ {
		r.mergeInto(c.l, &out, b)
	}
	for e := range out {
		out[e] = finish(Event(e).kind(), out[e])
	}
	return out
}
