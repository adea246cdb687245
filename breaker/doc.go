// Package breaker holds slidegate's circuit breakers. A breaker stops calls
// to a failing dependency, so that it can recover and callers fail fast.
//
// Each breaker runs a request with Do, which counts its outcome. Allow
// returns a [Promise] to settle by hand. [Breaker] is the small interface
// the guard asks of a breaker; a type of your own can implement it
// ([NewPromise]).
//
// [SRE] is the Google SRE client-side throttle, as go-zero's breaker is. It
// blocks requests with a probability that follows the share that succeed
// over a sliding window. It has no state to trip. After an outage it lets
// the load back over one window, as a ramp. A [BlockPolicy] says whether
// the requests it blocks count.
//
// [Circuit] is the state machine of Sentinel and gobreaker: closed, open,
// half-open. It opens on a [Strategy] over a sliding window: [ErrorRatio],
// [ErrorCount], [SlowRatio], [ConsecutiveFailures], or a condition of your
// own ([TripWhen]). Half-open, it allows at most n probes at once, and only
// probes decide. A probe that hangs times out. Outcomes from an earlier
// generation are ignored. The open timeout can back off exponentially.
//
// Both count outcomes in a [window.Counter] with [window.CachedSums]: no
// outcome is lost or misplaced when a bucket is reused, and the window reads
// in constant time. [Stats]
// holds their state and counts, for metrics. Allowing and settling a request
// allocate nothing. Time is monotonic nanoseconds from a [clock.Clock].
// Every method that reads the clock has an ...At twin, for simulations on a
// [clock.Manual]. A bad option is an error that names it (see [Option]).
package breaker
