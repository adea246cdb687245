// Package flow limits traffic. [QPS] caps the requests per interval,
// [Concurrency] those in flight, and [Throttle] spaces them evenly. A
// Concurrency or a Throttle per key (PerKey in its settings), and
// [KeyedQPS], do so for each user, tenant or client, in bounded memory.
// Their decisions take the key; a limiter not per key ignores it.
// [Shedder] and [Adaptive] protect a service from overload without a fixed
// limit.
// [RetryBudget] and [Backoff] bound a client's retries.
//
// Every limiter decides in one atomic step. A request is allowed and
// counted by the same compare-and-swap, so concurrent callers cannot all
// find room for one more. Limits are exact: a QPS limiter of N per interval
// allows at most N in every interval of that length, wherever it starts.
//
// # One shape for every limiter
//
// A limiter is made by New<Limiter>(<Limiter>Settings). A settings struct
// holds only what its limiter takes, so a setting that another limiter
// takes does not compile. Limits are taken as given: 0 allows nothing,
// and none is above 2^32-1.
// Every other zero field takes its default, which the field's doc states.
// Settings are plain data, which a program can build from a rules file,
// compare and print. A bad setting is a configuration error naming the field
// and its value.
//
// A limiter answers with a [Decision]: whether a request may go, why not
// ([Reason]), when a retry could go, and how long to wait first. A refused
// Wait returns a [*BlockError]. Every refusal matches [ErrBlocked].
//
// The limiters that count requests in flight fill a [Permit]. The request
// ends it with [Permit.Done], and an [Outcome] that tells the limiter what
// the request says of the service. A throttle's place is a [Reservation],
// given back with [Reservation.Cancel]. A count that a QPS limiter or a
// retry budget made is a [Grant], given back with GiveBack.
//
// Time is monotonic nanoseconds from a clock.Clock. Every method that reads
// the clock has an ...At twin that takes the time instead, so simulations
// run on a clock.Manual without sleeping. Deciding allocates nothing.
package flow
