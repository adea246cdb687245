// Package window holds slidegate's real-time statistics: counts, sums and
// latency distributions over the last few seconds, kept in rings of
// time-aligned buckets and read without locks.
//
// A ring (Sentinel's LeapArray) is a fixed array of buckets of width w, reused
// as time advances: the bucket holding time t starts at the multiple of w at
// or before t. Reads cover an interval of whole buckets ending with the bucket
// holding now. Three types are built on the one ring:
//
//   - Counter: per-bucket counts of events (allowed, blocked, succeeded,
//     failed, response time, ...), as Sentinel's MetricBucket, and View, a read of the
//     last part of a Counter's interval (Sentinel's SlidingWindowMetric).
//   - RollingWindow: go-zero's rolling window of sums and counts, with its
//     Add / Reduce API.
//   - Histogram: one log-linear latency histogram per bucket, answering
//     quantiles within 0.79% over any view (3.2% in a fifth of the memory
//     with Compact).
//   - Sketch: latencies over the two halves of an interval, quantiles within
//     4.43% and the exact maximum, and every latency by bin since it was
//     made (TotalsInto, for histograms that add up across processes), in a
//     few hundred bytes that grow with the powers of two the latencies
//     reach: one per resource.
//
// Everything here is safe for concurrent use and allocates nothing to record
// or to read. Nothing takes a lock; the one wait is a writer's that finds its
// bucket's slot being reset, a few stores done once per bucket width, and
// readers never wait. Time is monotonic nanoseconds from a
// clock.Clock; every method that reads the clock has an ...At twin that takes
// the time instead, so simulations and tests run without sleeping.
//
// Exactness: a bucket's slot is reset exactly once when a later bucket takes
// it, and every word of a bucket carries a tag of the bucket it belongs to,
// so a writer delayed while its slot was taken over can neither add into the
// later bucket nor be wiped after it was counted. Values for buckets already
// replaced are dropped and counted (Counter.Late). The package flow builds
// limiters on these guarantees, and breaker builds circuit breakers.
package window
