// Package httpguard guards net/http handlers and clients with a
// slidegate.Guard.
//
// Middleware wraps a handler: each request enters the guard's resource for
// its route (by default the method and the ServeMux pattern that serves it,
// "GET /users/{id}"), a request that a rule blocks gets 429 Too Many
// Requests (a flow rule's limit) or 503 Service Unavailable (a breaker, or
// a shed or adaptive rule finding the service overloaded) with a
// Retry-After header where the rule knows when to retry, and the response's
// status, 5xx meaning an error, is recorded when the handler returns, so that
// error-counting breakers see the server's failures. A recorded 503 (or
// 429, see StatusError.Overloaded) is an overload signal on which adaptive
// rules back off. A handler that panics is
// recorded as an error and the panic goes on.
//
//	g, err := slidegate.New()
//	_ = g.SetRules(rules)
//	mux := http.NewServeMux()
//	mux.HandleFunc("GET /users/{id}", getUser)
//	http.ListenAndServe(":8080", httpguard.Middleware(g)(mux))
//
// # Where to place Middleware
//
// Middleware names a request by its route, which it must know before the
// request enters the guard, and so before the mux routes it. Place it
// directly around the *http.ServeMux, as above, or around one route
// (mux.Handle("GET /users/{id}", httpguard.Middleware(g)(getUser))). With
// other middleware between it and the mux, give it the mux:
//
//	h := httpguard.Middleware(g, httpguard.WithMux(mux))(logging(mux))
//
// Placed elsewhere without WithMux, it names requests by their method and
// UnknownRoute ("GET (unknown route)"), never by their paths, and warns once
// through its logger (WithLogger) that rules on routes do not apply.
//
// Transport does the same for the requests an http.Client sends: a call a
// rule blocks returns a *slidegate.BlockError without reaching the network,
// and 5xx responses and transport errors are recorded as errors.
//
// # Retries
//
// WithRetry makes Transport retry the requests that fail transiently (a
// transport error, 502, 503, 504) and are safe to repeat, within a
// flow.RetryBudget: retries add at most a ratio of the recent requests plus
// a floor, however the downstream fails. No retry is sent into an open
// breaker, and a half-open breaker's probe is never retried.
//
//	budget, _ := flow.NewRetryBudget(flow.RetryBudgetSettings{Ratio: 0.2, MinPerSecond: 10})
//	client := &http.Client{Transport: httpguard.Transport(g, nil, httpguard.WithRetry(budget, httpguard.RetryPolicy{}))}
//
// # Keys
//
// A request's key (slidegate.WithKey) is what a resource's per-key rules
// (slidegate.FlowRule.PerKey) limit on its own: a client address, an API
// key, a tenant. KeyFromClientIP keys each request by its client's IP
// address, an IPv6 client by its /64, believing forwarding headers
// (X-Forwarded-For, Forwarded) only from the reverse proxies it is told to
// trust (see ClientIP);
// KeyFromHeader keys it by a header's value, KeyFrom by any function of the
// request. Without one of them every request has the empty key "", one key
// like any other.
//
//	// At most 10 requests per second from each client address, behind a
//	// load balancer in 10.0.0.0/8.
//	_ = g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
//		{Resource: "POST /login", Limit: 10, PerKey: true},
//	}})
//	lb := netip.MustParsePrefix("10.0.0.0/8")
//	h := httpguard.Middleware(g, httpguard.KeyFromClientIP(lb))(mux)
//
// A key is input a client chooses: the guard gets at most
// slidegate.MaxKeyLength bytes of it, and the response to a blocked request
// never repeats it.
package httpguard
