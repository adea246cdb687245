// Package breaker holds slidegate's circuit breakers, which stop calling a
// dependency that is failing, so that it can recover and callers fail fast.
//
// Two breakers share one API, Breaker, which is go-zero's: Do,
// DoWithAcceptable, DoWithFallback, DoWithFallbackAcceptable and their ...Ctx
// variants run a request and count its outcome; Allow returns a Promise to
// settle by hand (Succeed, Fail, Ignore, Done).
//
//   - Adaptive is the Google SRE client-side throttle that go-zero's breaker
//     implements: it blocks requests with a probability that follows the
//     share of requests that succeed over a sliding window. It has no states
//     to trip and recovers as the dependency does. Whether the requests it
//     blocks count is a documented choice (BlockPolicy).
//   - Circuit is the state machine of Sentinel and gobreaker: closed, open,
//     half-open, opening on an error ratio, an error count, a ratio of slow
//     requests, a run of consecutive failures, or a condition of your own
//     over the window's Counts (Strategy: ErrorRatio, ErrorCount, SlowRatio,
//     ConsecutiveFailures, TripWhen), over a sliding window of several
//     buckets. Half-open allows at most n probes at once, only probes
//     decide, a probe that hangs times out, outcomes from an earlier
//     generation are ignored, and the open timeout can back off
//     exponentially.
//
// Both count outcomes in a window.Tally, so that no outcome is lost or
// misplaced when a bucket is reused and the whole window reads in constant
// time, and expose their state and counts (Stats) for metrics. Allowing and
// settling a request allocate nothing; time is monotonic nanoseconds from a
// clock.Clock, and every method that reads the clock has an ...At twin for
// simulations on a clock.Manual (see Breaker). A bad option is an error
// naming it, never ignored (see Option).
package breaker
