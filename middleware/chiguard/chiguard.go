package chiguard

import (
	"net/http"
	"sync"

	"github.com/go-chi/chi/v5"
	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/middleware/httpguard"
)

// Middleware returns middleware that guards a handler with g (nil means
// slidegate.Default()) as httpguard.Middleware does, with the same options
// (keys, WithIsError, WithBlockedHandler, WithLogger and the rest), but
// names each request by the route of the chi router that serves it: its
// method (httpguard.Method) and the router's whole pattern for its method
// and path (chi.Routes.Find), "GET /users/{id}", or httpguard.NoRoute if
// no route of the router serves the request (chi's 404 and 405).
//
// The router is the one whose routing context the request carries, when
// Middleware runs inside a chi router (in Use, With or a sub-router), or
// next, when next is a chi.Routes that Middleware wraps from outside.
// Without either, Middleware cannot learn the route and names the request
// as httpguard.Middleware does then: by httpguard.UnknownRouteResource,
// never by its path, with a warning, once. An httpguard.WithResource or
// httpguard.WithRoute among opts wins over the router.
func Middleware(g *slidegate.Guard, opts ...httpguard.Option) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		outer, _ := next.(chi.Routes)
		route := httpguard.WithRoute(func(r *http.Request) (string, bool) { return Route(r, outer) })
		return httpguard.Middleware(g, append([]httpguard.Option{route}, opts...)...)(next)
	}
}

// lookups holds routing contexts for Route's lookups, which write to the
// context they are given: not the request's, which chi routes by after.
var lookups = sync.Pool{New: func() any { return chi.NewRouteContext() }}

// Route returns the pattern of the route that will serve r: the whole
// pattern, across mounted routers, of the route that the root router whose
// routing context r carries (chi.RouteContext) finds for r's method and
// path, or else the route that router finds, if it is not nil; "" if the
// router has no route for r. ok is false when there is no router to ask.
//
// The method is the routing context's RouteMethod if a middleware set one,
// else r's; the path is r's (URL.RawPath if set, else URL.Path), as chi
// routes by at its root.
func Route(r *http.Request, router chi.Routes) (pattern string, ok bool) {
	method := r.Method
	if rctx := chi.RouteContext(r.Context()); rctx != nil && rctx.Routes != nil {
		router = rctx.Routes
		if rctx.RouteMethod != "" {
			method = rctx.RouteMethod
		}
	}
	if router == nil {
		return "", false
	}
	path := r.URL.RawPath
	if path == "" {
		path = r.URL.Path
	}
	if path == "" {
		path = "/"
	}
	lookup := lookups.Get().(*chi.Context)
	lookup.Reset()
	pattern = router.Find(lookup, method, path)
	lookups.Put(lookup)
	return pattern, true
}
