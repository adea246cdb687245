// Package windowhook holds what package window keeps out of its API for
// the packages of this module. OutcomesAfter reads the part of a counter's
// interval that follows a given time: a circuit breaker that reads its
// resource's counter counts only what came after it last closed.
//
// Package window sets each as it is initialized, before any package that
// imports window. They cannot be typed here, for package window imports
// this one: each comment gives the type to assert.
package windowhook

// OutcomesAfter is a
//
//	func(c *window.Counter, now, t int64) (succeeded, failed int64)
//
// that returns window.Succeeded and window.Failed summed over the buckets
// of c's interval at time now that come after the bucket holding time t,
// as Counter.SumsAt reads them. If that bucket is older than the interval,
// it is the whole interval.
var OutcomesAfter any
