package window

import "sync/atomic"

// CachedSums makes a [Counter] read its whole interval in constant time,
// not one load per bucket. It suits a reader that wants the whole interval
// on every request, as a circuit breaker does. It applies to a Counter only.
//
// Such a Counter keeps the sums of the buckets before the current one. The
// first reader to see a new bucket computes them, once per bucket width. A
// reader that finds them being computed reads the ring instead. Readers
// never wait.
//
// What [Counter.SumsAt] returns differs in one way. A value added after
// the cache was computed, for a time before the current bucket, shows from
// the next bucket on. Such a value comes from a writer that read the clock
// just before the bucket changed, or from an AddAt with an older time. A
// value for a time in the current bucket shows at once. A [Counter.View]
// shorter than the interval reads the ring, as without the option.
func CachedSums() Option {
	return func(o *options) { o.cached = true }
}

// A sumsCache is the cache of a Counter made CachedSums: its sums at time
// now are a base, every event combined over the buckets before the one
// holding now, plus the bucket holding now read from the ring. The base
// changes only when the current bucket does, so it is computed once per
// bucket width, by the first reader to see the new bucket, and kept.
//
// The base is published under a sequence word, seq, and follows this
// protocol:
//
//   - seq holds b<<1 once the base of bucket b (the buckets before b within
//     the interval) is written, and b<<1|1 while a reader is writing it.
//   - A reader moves seq only from a written base of an older bucket to
//     b<<1|1, by compare-and-swap, so the bucket in seq only grows, a value
//     of seq never repeats, and exactly one reader writes the base of b: the
//     one whose swap succeeded. It stores seq = b<<1 when done.
//   - A reader at a time in bucket b takes the base if seq reads b<<1 both
//     before and after it loads the base's words; the second read proves no
//     writer started on a later base meanwhile. A reader that finds the base
//     being written, or written for a later bucket than its own (its now is
//     older than another reader's), reads the whole interval from the ring
//     instead, as a Counter without the cache does. Readers never wait.
type sumsCache struct {
	seq  atomic.Uint64
	base [numEvents]atomic.Int64 // each event combined over the base's buckets, empty values unmapped (see finish)
}

// before combines every event over the buckets of the interval before bucket
// b, leaving empty minimums and maximums unmapped so that the current bucket
// can still be merged in: the base of a sumsCache.
func (c *Counter) before(b uint64) Sums {
	r := c.r
	var out Sums
	for e := range out {
		out[e] = Event(e).kind().empty()
	}
	for x := b - uint64(r.n) + 1; x != b; x++ {
		r.mergeInto(c.l, &out, x)
	}
	return out
}
