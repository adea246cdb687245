// Package breakerhook holds what package breaker keeps out of its API for
// the guard and the comparison module. OnTransition tells a registry of many
// circuits of their changes of state as they happen, with one function for
// them all: it runs under a circuit's lock, where a slow or reentrant
// function would stall or deadlock the circuit (users have
// breaker.OnStateChange). RecordAt settles a promise with an outcome the
// guard has classified itself, RetryAfterAt reads an open circuit's rest of
// its timeout without its window, and WithRandom makes an SRE breaker's
// draws reproducible.
//
// Package breaker sets each as it is initialized, before any package that
// imports breaker. They cannot be typed here, for package breaker imports
// this one: each comment gives the type to assert.
package breakerhook

// OnTransition is a
//
//	func(f func(*breaker.Circuit, breaker.Transition)) breaker.Option
//
// whose option registers f to be told of a circuit's changes of state, and
// of the circuit that changed. f runs on the goroutine that makes the
// change, with the circuit's state lock held, before any other change: it
// must return at once, never wait, and never call the circuit. A nil f is
// an error.
var OnTransition any

// RecordAt is a
//
//	func(p breaker.Promise, now int64, o breaker.Outcome)
//
// that settles p with outcome o at time now, on the breaker's clock. An o
// that is not an Outcome counts nothing.
var RecordAt any

// RetryAfterAt is a
//
//	func(c *breaker.Circuit, now int64) time.Duration
//
// that returns the rest of c's open timeout at time now while c is open,
// and 0 otherwise.
var RetryAfterAt any

// WithRandom is a
//
//	func(f func() float64) breaker.Option
//
// whose option makes an SRE breaker draw from f, which returns a number in
// [0, 1), instead of rand.Float64. A nil f is an error.
var WithRandom any

// Shared is a
//
//	func() breaker.Option
//
// whose option makes a circuit that reads the counter of the resource it
// protects instead of a window of its own: Share gives it that counter,
// before the circuit is used. Only a circuit of the default window whose
// strategy is an error ratio, an error count or consecutive failures can
// share; another is an error.
var Shared any

// Share is a
//
//	func(c *breaker.Circuit, ctr *window.Counter, publish func())
//
// that gives c, made with Shared and not given one yet, the counter ctr of
// its resource, which counts every request's outcome (Succeeded or Failed)
// over the default window. It calls publish, which makes the resource tell
// c of every request that ends (SettleShared, Uncounted), before c begins
// to count: a request that ends before publish is never counted.
var Share any

// TakeShared is a
//
//	func(p breaker.Promise, served, exited int64, o breaker.Outcome, n int64) (w any, add int)
//
// that takes away from p's circuit, made with Shared, what it will not
// count of p's request, before its resource's counter counts it: n
// requests at time exited, failed unless o is Success. Its results go to
// SettleShared.
var TakeShared any

// SettleShared is a
//
//	func(p breaker.Promise, w any, add int, served, exited int64, o breaker.Outcome, n int64)
//
// that settles p with outcome o at time served once the resource's
// counter has counted the request, given what TakeShared returned.
var SettleShared any

// Uncounted is a
//
//	func(c *breaker.Circuit, exited int64, failed bool, n int64) (w any)
//
// that tells c, made with Shared, that its resource's counter is about to
// count n requests that ended at time exited, failed or not, and that c
// did not allow: they were allowed before c was given the counter. Its
// result goes to UncountedAfter.
var Uncounted any

// UncountedAfter is a
//
//	func(c *breaker.Circuit, w any, exited int64, failed bool, n int64)
//
// that ends Uncounted once the resource's counter has counted the requests.
var UncountedAfter any

// Unshare is a
//
//	func(c *breaker.Circuit)
//
// that gives c, made with Shared and not given a counter, a window of its
// own: another circuit reads its resource's counter.
var Unshare any

// Shares is a
//
//	func(c *breaker.Circuit) bool
//
// that reports whether c, made with Shared, has been given its counter.
var Shares any

// Uncached is a
//
//	func() breaker.Option
//
// whose option makes a circuit's window of its own read every bucket,
// without the cache that makes a value added late for an older bucket
// show a bucket later: tests hold a shared circuit to one.
var Uncached any

// Thresholds is a
//
//	func(c *breaker.Circuit, s breaker.Strategy, opts ...breaker.Option) (th any, err error)
//
// that returns the thresholds of a circuit made as c with strategy s and
// options opts, for SetThresholds, or the error breaker.NewCircuit would
// return for them. Thresholds are the strategy's threshold, count or slow
// time, the minimum volume, the open timeout and its maximum, the probes
// and their timeout. Anything else in s and opts must be c's: the kind of
// strategy, the window, no classifier of its own; else the result is an
// error. Whether c shares its resource's counter is not an option: c keeps
// it.
var Thresholds any

// SetThresholds is a
//
//	func(c *breaker.Circuit, th any)
//
// that gives c thresholds th, which Thresholds returned for c, in one
// atomic step: c keeps its state, its counts and its probes in flight. Its
// next judgement of an outcome uses the new ones; an open circuit stays
// open until the time set when it opened; a half-open spell keeps its
// places, the next has the new number; a probe's timeout applies at once.
var SetThresholds any
