// Package ginguard guards the handlers of a gin engine with a
// slidegate.Guard, as httpguard.Middleware guards a net/http mux.
//
// Middleware is a gin.HandlerFunc for Engine.Use (or a group's Use): gin
// runs it after it has routed the request, so each request enters the
// guard's resource for its method and route, as gin wrote it
// ("GET /users/:id"). A request that a rule blocks is aborted with 429 Too
// Many Requests (a flow rule's limit) or 503 Service Unavailable (a breaker,
// or a shed or adaptive rule finding the service overloaded), with a
// Retry-After header where the rule knows when to retry, as
// httpguard.WriteBlocked answers. When the handlers return, a 5xx status, or
// an error a handler attached with Context.Error, is recorded as a failure
// for the breakers; a handler that panics is recorded as one and the panic
// goes on, to gin.Recovery or the server.
//
//	g, err := slidegate.New()
//	_ = g.SetRules(rules) // {Resource: "GET /users/:id", Limit: 100}
//	r := gin.New()
//	r.Use(gin.Recovery(), ginguard.Middleware(g))
//	r.GET("/users/:id", getUser)
//
// Names are bounded by the engine's routes, not by what clients send: a
// request no route serves is httpguard.NoRoute, and a method outside the
// standard nine is httpguard.OtherMethod.
package ginguard
