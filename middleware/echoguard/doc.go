// Package echoguard guards the handlers of an echo server with a
// [slidegate.Guard], as [httpguard.Middleware] guards a net/http mux.
//
// [Middleware] is an [echo.MiddlewareFunc] for Echo.Use, or a group's Use.
// echo runs it after it has routed the request. So each request enters the
// guard's resource for its method and route, as echo wrote it:
// "GET /users/:id". It is not for Echo.Pre, which runs before routing.
//
// A request that a rule blocks gets an [*echo.HTTPError] of one of two
// statuses, as [httpguard.WriteBlocked] answers:
//
//   - 429 Too Many Requests, for a flow rule's limit.
//   - 503 Service Unavailable, for a breaker, a shed or an adaptive rule.
//
// A Retry-After header says when to retry, where the rule knows. The
// server's error handler writes the error. When the handler returns, a 5xx
// status, written or returned as an error, is recorded as a failure for
// the breakers. A handler that panics is recorded as a failure, and the
// panic goes on, to middleware.Recover or the server.
//
//	g, err := slidegate.New()
//	_ = g.SetRules(rules) // {Resource: "GET /users/:id", Limit: 100}
//	e := echo.New()
//	e.Use(middleware.Recover(), echoguard.Middleware(g))
//	e.GET("/users/:id", getUser)
//
// Names are bounded by the server's routes, not by what clients send. A
// request no route serves (echo's 404 and 405) is [httpguard.NoRoute]. A
// method outside the standard nine is "_OTHER" ([httpguard.Method]).
package echoguard
