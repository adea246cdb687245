// Package flow limits traffic: how many requests may start per interval
// (QPS), how many may be in flight at once (Concurrency), and how evenly they
// are spaced (Throttle).
//
// Every limiter decides in one atomic step: a request is allowed and counted
// by the same compare-and-swap, so concurrent callers cannot all see room for
// one more and all take it, which is how check-then-count limiters (Sentinel's
// among them) let too many through under load.
//
// Limits are exact. A QPS limiter of N per interval L allows at most N in
// every interval of length L, wherever it starts, not only in the intervals
// that line up with its buckets: Sentinel-Go's default rule lets 2 N through
// in some intervals, and x/time/rate with a burst of N 1.99 N. Priority
// borrowing (Sentinel's occupiable windows) and warm-up (Sentinel's and
// Guava's cold start) keep that guarantee. The package flowsim measures it
// for any limiter.
//
// KeyedQPS is the QPS limit for each key (user, tenant, client address) on
// its own, keeping the same guarantee for every key, however many keys
// arrive, in memory bounded by a count-min sketch for the keys that carry
// little traffic and exact windows for those that carry much; several
// windows of one key (per second and per minute) are decided together.
//
// Shedder and Adaptive protect a service from overload without a fixed
// limit: the shedder by the CPU and Little's law, the adaptive limit by the
// response times it sees. No client can turn them against the others. At
// their limit they share the places among the keys of the requests (the
// routes, or the clients), so that a key whose requests stall keeps what
// it holds and gets no more; the shedder caps nothing while the CPU is
// cool; the adaptive limit judges response times without their outliers.
//
// Every limiter answers with a Decision: whether a request is allowed, why
// it is blocked (Reason), when a retry could be allowed (RetryAfter), and,
// for a reservation or a borrowed place, how long to wait first (Wait).
//
// Time is monotonic nanoseconds from a clock.Clock; every method that reads
// the clock has an ...At twin that takes the time, so simulations run on a
// clock.Manual without sleeping. Deciding allocates nothing.
//
// A bad argument or Option is an error, never ignored: a *ConfigError
// naming it and its value, which wraps ErrInvalidConfig.
package flow
