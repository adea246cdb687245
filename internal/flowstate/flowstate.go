// Package flowstate lets the guard, its exporters and the dashboard read
// what the limiters of package flow have learnt and counted, which flow
// does not export to its users. Package flow sets each reader as it is
// initialized, before any package that imports flow runs. A reader takes
// the limiter as an any: this package cannot name flow's types, for flow
// imports it.
package flowstate

import "time"

// A KeyStat is what a per-key QPS limiter says of one hot key.
type KeyStat struct {
	// Key is the key, cut to 64 bytes and made valid UTF-8.
	Key string
	// Allowed is how many of the key's requests the first window counts
	// now: those allowed in its last interval or so (its open bucket and
	// the k before it).
	Allowed int64
	// Blocked is how many of the key's requests were refused in the first
	// window's current interval and the one before.
	Blocked int64
}

// An Overload is what a shedder or an adaptive limit has learnt.
type Overload struct {
	// Limit is an adaptive limit's limit now. For a shedder it is the most
	// requests in flight it admits while it sheds, before it shares them:
	// math.MaxInt64 until it has learnt the service's capacity.
	Limit int64
	// InFlight is the requests admitted and not yet done.
	InFlight int64
	// Shedding says whether a shedder sheds: the CPU at or above its
	// threshold, or within the cool-off after it shed there.
	Shedding bool
	// Baseline is an adaptive limit's least mean response time, which it
	// judges queueing by; 0 until it has one.
	Baseline time.Duration
}

// A RetryStats is what a retry budget has counted.
type RetryStats struct {
	// Requests and Retries are the requests and the retries allowed in the
	// budget's last interval.
	Requests, Retries int64
	// Blocked is how many retries the budget has blocked since it was
	// made, for want of budget; NotRetried how many failed attempts it did
	// not retry because they were a breaker's probe or met an open breaker.
	Blocked, NotRetried int64
}

// The readers, set by package flow.
var (
	// TopKeys returns at most n of the hot keys q, a *flow.KeyedQPS,
	// counts most of at time now: busiest first, by allowed requests, or
	// by blocked ones if byBlocked, then by key. A hot key has an exact
	// window, and uses more than half its first window's limit, was
	// refused, or has an override. Keys that read the same once cut are
	// added up into one. It takes each shard's mutex in turn, and
	// allocates its result.
	TopKeys func(q any, now int64, n int, byBlocked bool) []KeyStat
	// Keys returns every key TopKeys chooses from, in no order: for a
	// reader that adds keys up further before it chooses (the Prometheus
	// collector, whose label values may read the same).
	Keys func(q any, now int64) []KeyStat
	// Shedder returns what s, a *flow.Shedder, has learnt at time now.
	Shedder func(s any, now int64) Overload
	// Adaptive returns what a, a *flow.Adaptive, has learnt.
	Adaptive func(a any) Overload
	// KeyMemory returns the bytes the limiters of m, a *flow.KeyMemory,
	// hold now, and its limit.
	KeyMemory func(m any) (inUse, limit int64)
	// Retries returns what b, a *flow.RetryBudget, has counted, its
	// interval read at its clock's time.
	Retries func(b any) RetryStats
	// KeyedLeftAt returns how many more requests key may have at time now
	// before one of q's windows refuses it, q a *flow.KeyedQPS: the least,
	// over the windows, of the key's limit less what the window counts of
	// it. It counts nothing. What it says holds until the next decision
	// for the key, or until time moves.
	KeyedLeftAt func(q any, now int64, key string) int64
)
