// Package ginguard guards the handlers of a gin engine with a
// [slidegate.Guard], as [httpguard.Middleware] guards a net/http mux.
//
// [Middleware] is a [gin.HandlerFunc] for Engine.Use, or a group's Use.
// gin runs it after it has routed the request. So each request enters the
// guard's resource for its method and route, as gin wrote it:
// "GET /users/:id".
//
// A request that a rule blocks is aborted with one of two statuses, as
// [httpguard.WriteBlocked] answers:
//
//   - 429 Too Many Requests, for a flow rule's limit.
//   - 503 Service Unavailable, for a breaker, a shed or an adaptive rule.
//
// A Retry-After header says when to retry, where the rule knows. When the
// handlers return, a 5xx status is recorded as a failure for the breakers.
// So is an error a handler attached with Context.Error. A handler that
// panics is recorded as a failure, and the panic goes on, to gin.Recovery
// or the server.
//
//	g, err := slidegate.New()
//	_ = g.SetRules(rules) // {Resource: "GET /users/:id", Limit: 100}
//	r := gin.New()
//	r.Use(gin.Recovery(), ginguard.Middleware(g))
//	r.GET("/users/:id", getUser)
//
// Names are bounded by the engine's routes, not by what clients send. A
// request no route serves is [httpguard.NoRoute]. A method outside the
// standard nine is "_OTHER" ([httpguard.Method]).
package ginguard
