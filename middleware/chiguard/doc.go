// Package chiguard guards the handlers of a chi router with a
// [slidegate.Guard], as [httpguard.Middleware] guards a net/http mux.
//
// Each request enters the guard's resource for its method and chi route
// pattern, as in "GET /users/{id}". The pattern is the whole of it, across
// mounted and nested routers. [Middleware] asks the router for the pattern
// ([chi.Routes.Find]) before it calls the next handler. So it can sit
// anywhere:
//
//   - In the root router's Use, the usual place.
//   - In a sub-router's Use.
//   - Inline on some routes, with Router.With.
//   - Around the router, from outside.
//
// It looks the request up by the method and path chi routes by, after
// middleware that rewrote them, such as middleware.StripSlashes and
// CleanPath before routing. A HEAD that GetHead serves by its GET route
// counts under that route. So a variant of a path, such as "/users/1/",
// does not slip past a rule. One case it cannot follow is a path rewritten
// at the root, below a mount whose pattern has a parameter ("/{tenant}/*").
// Put Middleware in the root router's Use there.
//
// docs/middleware.md says why Middleware looks the route up itself.
//
//	g, err := slidegate.New()
//	_ = g.SetRules(rules) // {Resource: "GET /users/{id}", Limit: 100}
//	r := chi.NewRouter()
//	r.Use(middleware.Recoverer, chiguard.Middleware(g))
//	r.Get("/users/{id}", getUser)
//
// A request that a rule blocks gets [httpguard.WriteBlocked]'s answer,
// with one of two statuses:
//
//   - 429 Too Many Requests, for a flow rule's limit.
//   - 503 Service Unavailable, for a breaker, a shed or an adaptive rule.
//
// A Retry-After header says when to retry, where the rule knows. A 5xx
// response is recorded as a failure for the breakers. A handler that
// panics is recorded as a failure, and the panic goes on.
//
// Names are bounded by the router's routes, not by what clients send. A
// request no route serves (chi's 404 and 405) is [httpguard.NoRoute]. A
// method outside the standard nine is "_OTHER" ([httpguard.Method]).
package chiguard
