// Package breakerhook holds an option of package breaker that is for the
// guard only: OnTransition, which tells a registry of many circuits of their
// changes of state as they happen, with one function for them all. It is
// kept out of breaker's API because it runs under a circuit's lock, where a
// slow or reentrant function would stall or deadlock the circuit; users
// have breaker.OnStateChange.
package breakerhook

// OnTransition is set by package breaker as it is initialized, before any
// package that imports breaker: a
//
//	func(f func(*breaker.Circuit, breaker.Transition)) breaker.Option
//
// whose option registers f to be told of a circuit's changes of state, and
// of the circuit that changed. f runs on the goroutine that makes the
// change, with the circuit's state lock held, before any other change: it
// must return at once, never wait, and never call the circuit. A nil f is
// an error. It cannot be typed here, for package breaker imports this one.
var OnTransition any
