// Package echoguard guards the handlers of an echo server with a
// slidegate.Guard, as httpguard.Middleware guards a net/http mux.
//
// Middleware is an echo.MiddlewareFunc for Echo.Use (or a group's Use),
// which echo runs after it has routed the request, so each request enters
// the guard's resource for its method and route, as echo wrote it
// ("GET /users/:id"); not for Echo.Pre, which runs before routing. A
// request that a rule blocks gets an *echo.HTTPError of 429 Too Many
// Requests (a flow rule's limit) or 503 Service Unavailable (a breaker, or a
// shed or adaptive rule finding the service overloaded), with a Retry-After
// header where the rule knows when to retry, as httpguard.WriteBlocked
// answers, for the server's error handler to write. When the handler
// returns, a 5xx status, written or returned as an error, is recorded as a
// failure for the breakers; a handler that panics is recorded as one and
// the panic goes on, to middleware.Recover or the server.
//
//	g, err := slidegate.New()
//	_ = g.SetRules(rules) // {Resource: "GET /users/:id", Limit: 100}
//	e := echo.New()
//	e.Use(middleware.Recover(), echoguard.Middleware(g))
//	e.GET("/users/:id", getUser)
//
// Names are bounded by the server's routes, not by what clients send: a
// request no route serves (echo's 404 and 405) is httpguard.NoRoute, and a
// method outside the standard nine is httpguard.OtherMethod.
package echoguard
