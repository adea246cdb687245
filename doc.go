// Package slidegate is the guard: named resources, the rules that protect
// them, and the statistics they keep. It is built on the packages below it:
// window for statistics, flow for rate and concurrency limits, breaker for
// circuit breakers.
//
// Name a resource, give it rules, and wrap the code that uses it.
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
// [Entry.Exit] records the error it is given when it is called. To defer
// it, use a closure that reads the final error: defer func() { e.Exit(err)
// }(). Or run the request in one call, [Guard.Do], which does this for you
// and counts a panic as an error.
//
// A rule marked PerKey limits each key on its own: the user, tenant or
// client a request names with [WithKey]. Its limit holds for every key, in
// any interval, in bounded memory. The per-key QPS rules of a resource (5 a
// second, 100 a minute) are decided together, all or nothing.
//
//	err = g.Do(ctx, "GET /search", search, slidegate.WithKey(userID))
//
// [Guard.SetRules] validates rules whole, reporting every problem with its
// place. It puts them in force in one step, as an immutable snapshot, and
// [Guard.Enter] takes no lock. A rule repeated unchanged keeps its
// limiter's counts and its breaker's state. Every resource keeps
// statistics, rules or not, up to a bound on the number of resources.
// [Default] is a guard for programs that need one; libraries and tests
// make their own.
//
// Rules have names ([FlowRule.Name], or their type: "qps", "breaker"). A
// [BlockError], the metrics and the dashboard use them. A rule in shadow
// ([FlowRule.Shadow], [Rules.Shadow]) decides and counts, and blocks
// nothing. A guard tells what happens to it as events ([Guard.OnEvent],
// [Guard.Events]): breakers changing state, rules put in force or refused,
// its cluster's health, resources it had no room for. Package rulefile
// keeps a guard's rules in step with a file or another source.
package slidegate
