// Package slidegate is the guard: named resources, the rules that protect
// them, and the statistics they keep. It is what Sentinel's users call its
// API, built on the packages below it: window for statistics, flow for rate
// and concurrency limits, breaker for circuit breakers.
//
// Name a resource, give it rules, and wrap the code that uses it:
//
//	g, err := slidegate.New()
//	err := g.SetRules(slidegate.Rules{
//		Flow:     []slidegate.FlowRule{{Resource: "GET /orders", Limit: 100}},
//		Breakers: []slidegate.BreakerRule{{Resource: "mysql", Strategy: slidegate.ErrorRatioBreaker, Threshold: 0.5}},
//	})
//	e, err := g.Enter(ctx, "GET /orders")
//	if err != nil {
//		return err // a *BlockError: which rule blocked it, why, when to retry
//	}
//	err = listOrders(ctx)
//	e.Exit(err) // the outcome the breakers count, and the response time
//
// Exit records the error it is given when it is called: defer it in a
// closure that reads the final error (defer func() { e.Exit(err) }()), not
// as defer e.Exit(err), which records err as it was at the defer, nil. Or
// run the request in one call, which does this for you and counts a panic
// as an error: g.Do(ctx, "mysql", func() error { ... }).
//
// A rule marked PerKey limits each key on its own: the user, tenant or client
// a request names with WithKey. Its limit holds for every key in any
// interval, however many keys come, in bounded memory, and the per-key QPS
// rules of a resource (5 a second, 100 a minute) are decided together, all
// or nothing:
//
//	err = g.Do(ctx, "GET /search", search, slidegate.WithKey(userID))
//
// Rules are validated whole (every problem reported with its place) and put in
// force in one step as an immutable snapshot; Enter takes no lock. A rule
// repeated unchanged by a new set of rules keeps its limiter's counts and its
// breaker's state. Every resource keeps statistics whether or not it has
// rules, up to a bound on the number of resources. The package-level Enter,
// Do and SetRules use a default Guard, for programs; libraries and tests make
// their own.
//
// Rules have names (FlowRule.Name, or their type: "qps", "breaker"), which a
// *BlockError, the metrics and the dashboard use. A rule in shadow
// (FlowRule.Shadow, Rules.Shadow) decides and counts, and blocks nothing:
// ResourceStats.Totals.WouldBlockBy counts what it would have blocked. A
// guard tells what happens to it as events (OnEvent, Events): breakers
// changing state, rules put in force and what changed, rules refused, its
// cluster's health, resources it had no room for; and logs them through
// WithLogger. Package rulefile keeps a guard's rules in step with a file or
// another source.
package slidegate
