package chiguard

import (
	"net/http"
	"strings"
	"sync"

	"github.com/go-chi/chi/v5"
	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/middleware/httpguard"
)

// Middleware returns middleware that guards a handler with g, as
// [httpguard.Middleware] does. A nil g means [slidegate.Default]. It takes
// the same options: keys, WithIsError, WithBlockedHandler, WithLogger and
// the rest. But it names each request by the route of the chi router that
// serves it. The name is the request's method ([httpguard.Method]) and the
// router's whole pattern for its method and path ([chi.Routes.Find]), as
// in "GET /users/{id}". If no route of the router serves the request
// (chi's 404 and 405), the name is [httpguard.NoRoute].
//
// Inside a chi router (in Use, With or a sub-router), the router is the
// one whose routing context the request carries. From outside, it is
// next, when next is a [chi.Routes] that Middleware wraps. Without either,
// Middleware cannot learn the route. It names the request as
// httpguard.Middleware does then: by its method and
// "(unknown route)", never by its path, with a warning, once. An
// [httpguard.WithResource] or [httpguard.WithRoute] among opts wins over
// the router.
func Middleware(g *slidegate.Guard, opts ...httpguard.Option) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		outer, _ := next.(chi.Routes)
		route := httpguard.WithRoute(func(r *http.Request) (string, bool) {
			method, pattern, ok := find(r, outer)
			if pattern != "" && method != r.Method {
				// Routed as another method (a HEAD as a GET, by
				// middleware.GetHead): named as the request chi serves.
				pattern = method + " " + pattern
			}
			return pattern, ok
		})
		return httpguard.Middleware(g, append([]httpguard.Option{route}, opts...)...)(next)
	}
}

// lookups holds routing contexts for Route's lookups, which write to the
// context they are given: not the request's, which chi routes by after.
var lookups = sync.Pool{New: func() any { return chi.NewRouteContext() }}

// Route returns the pattern of the route that will serve r, or "" if the
// router has no route for r. The pattern is the whole pattern, across
// mounted routers. The router asked is the root router whose routing
// context r carries ([chi.RouteContext]), or else router, if it is not
// nil. ok is false when there is no router to ask.
//
// The method looked up is the routing context's RouteMethod if a
// middleware set one, else r's. A HEAD that no route serves is looked up
// as a GET, as middleware.GetHead routes it. The path is the one chi
// routes by at its root. That is the routing context's RoutePath, when a
// middleware before routing rewrote it (middleware.StripSlashes,
// CleanPath). Else it is r's: URL.RawPath if set, else URL.Path.
//
// Inside a mounted router, a RoutePath rewritten at the root is known only
// as the rest of the path below the mounts. When their patterns have no
// parameters ("/api/*"), Route looks that rest up under them too.
func Route(r *http.Request, router chi.Routes) (pattern string, ok bool) {
	_, pattern, ok = find(r, router)
	return pattern, ok
}

// find is Route, with the method it found the pattern for.
func find(r *http.Request, router chi.Routes) (method, pattern string, ok bool) {
	method = r.Method
	rctx := chi.RouteContext(r.Context())
	path := ""
	if rctx != nil && rctx.Routes != nil {
		router = rctx.Routes
		if rctx.RouteMethod != "" {
			method = rctx.RouteMethod
		}
		if len(rctx.RoutePatterns) == 0 {
			path = rctx.RoutePath // rewritten before routing began
		}
	}
	if router == nil {
		return method, "", false
	}
	if path == "" {
		path = r.URL.RawPath
		if path == "" {
			path = r.URL.Path
		}
		if path == "" {
			path = "/"
		}
	}
	lookup := lookups.Get().(*chi.Context)
	defer lookups.Put(lookup)
	look := func(method, path string) string {
		lookup.Reset()
		return router.Find(lookup, method, path)
	}
	pattern = look(method, path)
	if pattern == "" && rctx != nil && len(rctx.RoutePatterns) > 0 && rctx.RoutePath != "" {
		if prefix, ok := mounted(rctx.RoutePatterns); ok {
			pattern = look(method, prefix+rctx.RoutePath)
		}
	}
	if pattern == "" && method == http.MethodHead {
		if pattern = look(http.MethodGet, path); pattern != "" {
			method = http.MethodGet
		}
	}
	return method, pattern, true
}

// mounted returns the path that the mounts of patterns ("/api/*",
// "/v1/*") took off the front of the path they routed, and false if one of
// them has a parameter, which the path they took is not known from.
func mounted(patterns []string) (string, bool) {
	prefix := ""
	for _, p := range patterns {
		if !strings.HasSuffix(p, "/*") || strings.ContainsAny(strings.TrimSuffix(p, "/*"), "{*") {
			return "", false
		}
		prefix += strings.TrimSuffix(p, "/*")
	}
	return prefix, true
}
