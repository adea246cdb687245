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
