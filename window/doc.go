// Package window holds slidegate's real-time statistics: counts, sums and
// latency distributions over the last few seconds. They are kept in rings
// of time-aligned buckets and read without locks.
//
// A ring is a fixed array of buckets of width w, reused as time advances.
// The bucket holding time t starts at the multiple of w at or before t.
// Reads cover an interval of whole buckets ending with the bucket holding
// now. These types are built on the ring:
//
//   - [Counter] counts events ([Allowed], [Blocked], [RT], ...) per bucket.
//     [Counter.View] reads the last part of its interval. With [CachedSums]
//     the whole interval reads in constant time.
//   - [RollingWindow] is go-zero's rolling window of sums and counts.
//   - [Histogram] keeps one log-linear latency histogram per bucket.
//   - [Sketch] keeps latencies in two halves of an interval.
//
// A Histogram answers quantiles within 0.79%, over its interval or any
// view of it ([Histogram.View]). With [Compact] it answers within 3.2%, in
// a fifth of the memory. A Sketch answers quantiles within 4.43%, and the
// exact maximum. It also counts every
// latency by bin since it was made ([Sketch.TotalsInto]), for histograms
// that add up across processes. It takes a few hundred bytes, which grow
// with the powers of two its latencies reach. So a Sketch suits one per
// resource.
//
// Everything here is safe for concurrent use. Recording and reading
// allocate nothing, except when a Sketch first sees a latency in a power of
// two. Nothing takes a lock. Readers never wait, except [Counter.Totals]
// while a slot is being reset. A writer waits only for a slot being reset,
// a few stores once per bucket width.
//
// A structure that several cores write at once adds stripes: a set of
// words per processor, which readers combine. Counts stay exact.
//
// Time is monotonic nanoseconds from a [clock.Clock]. Every method that
// reads the clock has an ...At twin that takes the time instead. So
// simulations and tests run without sleeping.
//
// Counts are exact. A bucket's slot is reset exactly once, when a later
// bucket takes it. A writer delayed while its slot was taken over can
// neither add into the later bucket nor be wiped after it was counted.
// Values for buckets already replaced are dropped, and the ...At method
// that wrote them reports false. Package flow builds limiters on these guarantees, and
// package breaker builds circuit breakers.
//
// docs/window.md says how the ring, its tags and its stripes work, and how
// the latency bins were chosen.
package window
