// Package chiguard guards the handlers of a chi router with a
// slidegate.Guard, as httpguard.Middleware guards a net/http mux.
//
// Each request enters the guard's resource for its method and chi route
// pattern, the whole of it across mounted and nested routers:
// "GET /users/{id}". chi runs the middleware of Router.Use before it
// routes the request, and knows the pattern (RouteContext.RoutePattern)
// only after the handler ran, while a request must enter the guard before;
// so Middleware asks the router for the pattern itself (chi.Routes.Find),
// with the request's method and path, before it calls the next handler.
// It can thus sit anywhere: in the root router's Use (the usual place), in
// a sub-router's Use, inline on some routes (Router.With), or around the
// router from outside. It looks the request up by the method and path chi
// routes by, after middleware that rewrote them (middleware.StripSlashes
// and CleanPath before routing; a HEAD that GetHead serves by its GET route
// counts under that route), so that a variant of a path ("/users/1/") does
// not slip past a rule. One case it cannot follow: a path rewritten at the
// root, below a mount whose pattern has a parameter ("/{tenant}/*"); put
// Middleware in the root router's Use there.
//
//	g, err := slidegate.New()
//	_ = g.SetRules(rules) // {Resource: "GET /users/{id}", Limit: 100}
//	r := chi.NewRouter()
//	r.Use(middleware.Recoverer, chiguard.Middleware(g))
//	r.Get("/users/{id}", getUser)
//
// A request that a rule blocks gets httpguard.WriteBlocked's answer: 429
// Too Many Requests (a flow rule's limit) or 503 Service Unavailable (a
// breaker, or a shed or adaptive rule finding the service overloaded), with
// a Retry-After header where the rule knows when to retry. A 5xx response
// is recorded as a failure for the breakers; a handler that panics is
// recorded as one and the panic goes on.
//
// Names are bounded by the router's routes, not by what clients send: a
// request no route serves (chi's 404 and 405) is httpguard.NoRoute, and a
// method outside the standard nine is httpguard.OtherMethod.
package chiguard
