// Package httpguard guards net/http handlers and clients with a
// [slidegate.Guard].
//
// [Middleware] wraps a handler. Each request enters the guard's resource
// for its route. By default that is the method and the ServeMux pattern
// that serves it, such as "GET /users/{id}". A request that a rule blocks
// gets one of two statuses:
//
//   - 429 Too Many Requests, for a flow rule's limit.
//   - 503 Service Unavailable, for a breaker, a shed or an adaptive rule.
//
// The response carries a Retry-After header where the rule knows when to
// retry. The status the handler writes is recorded when it returns, and
// 5xx means an error. So error-counting breakers see the server's
// failures. A recorded 503 is an overload signal, on which adaptive rules
// back off (see [StatusError.Overloaded]). A handler that panics is
// recorded as an error, and the panic goes on.
//
//	g, err := slidegate.New()
//	_ = g.SetRules(rules)
//	mux := http.NewServeMux()
//	mux.HandleFunc("GET /users/{id}", getUser)
//	http.ListenAndServe(":8080", httpguard.Middleware(g)(mux))
//
// [Transport] does the same for the requests an [http.Client] sends. A
// call a rule blocks returns a [*slidegate.BlockError] without reaching
// the network. 5xx responses and transport errors are recorded as errors.
//
// # Where to place Middleware
//
// Middleware names a request by its route. It must know the route before
// the request enters the guard, and so before the mux routes it. Place it
// directly around the [*http.ServeMux], as above, or around one route:
//
//	mux.Handle("GET /users/{id}", httpguard.Middleware(g)(getUser))
//
// Placed elsewhere without [WithMux], it names requests by their method
// and "(unknown route)", as in "GET (unknown route)". It never names them by
// their paths. It warns once through its logger ([WithLogger]) that rules
// on routes do not apply. With other middleware between it and the mux,
// give it the mux:
//
//	h := httpguard.Middleware(g, httpguard.WithMux(mux))(logging(mux))
//
// # Retries
//
// [WithRetry] makes Transport retry the requests that fail transiently and
// are safe to repeat. A transient failure is a transport error, 502, 503
// or 504. Retries stay within a [flow.RetryBudget]: they add at most a
// ratio of the recent requests plus a floor, however the downstream fails.
// No retry is sent into an open breaker. A half-open breaker's probe is
// never retried.
//
//	budget, _ := flow.NewRetryBudget(flow.RetryBudgetSettings{Ratio: 0.2, MinPerSecond: 10})
//	client := &http.Client{Transport: httpguard.Transport(g, nil, httpguard.WithRetry(budget, httpguard.RetryPolicy{}))}
//
// # Keys
//
// A request's key ([slidegate.WithKey]) is what a resource's per-key rules
// ([slidegate.FlowRule.PerKey]) limit on its own: a client address, an API
// key, a tenant. [KeyFromClient] keys each request by its client's IP
// address, and an IPv6 client by its /64. It believes forwarding headers
// (X-Forwarded-For, Forwarded) only from the reverse proxies it is told to
// trust (see [ClientIP]). [KeyFromHeader] keys a request by a header's
// value, and [KeyFrom] by any function of the request. Without one of them
// every request has the empty key "", one key like any other.
//
//	// At most 10 requests per second from each client address, behind a
//	// load balancer in 10.0.0.0/8.
//	_ = g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
//		{Resource: "POST /login", Limit: 10, PerKey: true},
//	}})
//	lb := netip.MustParsePrefix("10.0.0.0/8")
//	h := httpguard.Middleware(g, httpguard.KeyFromClient(httpguard.ClientIP{TrustedProxies: []netip.Prefix{lb}}))(mux)
//
// A key is input a client chooses. The guard gets at most
// 256 bytes of it. The response to a blocked request
// never repeats it.
//
// docs/middleware.md says why an IPv6 client is keyed by its /64.
package httpguard
