// Package windowhook holds what package window keeps out of its API for
// the packages of this module. EnterAt and ExitAt are a request's two
// counts in its resource's Counter, the second taking the bucket the first
// found while it still holds the time. OutcomesAfter reads the part of a
// counter's interval that follows a given time: a circuit breaker that
// reads its resource's counter counts only what came after it last closed.
//
// Package window sets each as it is initialized, before any package that
// imports window. They cannot be typed here, for package window imports
// this one: each comment gives the type to assert.
package windowhook

// EnterAt is a
//
//	func(c *window.Counter, now int64, e window.Event, v int64) (b uint64, s int)
//
// that adds v to summed event e of c at time now, as Counter.AddAt does,
// and returns the bucket and slot it added to: a mark for ExitAt. For an
// event not summed, or not recorded, it is Counter.AddAt, and returns 0, 0.
var EnterAt any

// ExitAt is a
//
//	func(c *window.Counter, b uint64, s int, now int64, e1 window.Event, v1 int64, e2 window.Event, v2 int64) bool
//
// that adds v1 to e1 and v2 to e2 of c at time now, as Counter.AddPairAt
// does, b and s being EnterAt's mark of the same request: it adds in that
// bucket when now falls in it, and looks now's bucket up otherwise. It
// reports whether both values were recorded.
var ExitAt any

// OutcomesAfter is a
//
//	func(c *window.Counter, now, t int64) (succeeded, failed int64)
//
// that returns window.Succeeded and window.Failed summed over the buckets
// of c's interval at time now that come after the bucket holding time t,
// as Counter.SumsAt reads them. If that bucket is older than the interval,
// it is the whole interval.
var OutcomesAfter any

// CheckCounter is a
//
//	func(buckets int, interval time.Duration) error
//
// that returns the error window.NewCounter returns for buckets and
// interval, or nil: a circuit breaker that will read its resource's counter
// checks its window so, without making one.
var CheckCounter any
