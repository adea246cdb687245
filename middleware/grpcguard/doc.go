// Package grpcguard guards gRPC calls with a slidegate.Guard: interceptors
// for servers (the RPCs a service serves) and for clients (the RPCs it makes).
//
// Each RPC enters the guard's resource named by its full method
// ("/pkg.Service/Method", or what WithResource says) and exits when it ends,
// with the RPC's status: a code in the error set (DefaultErrorCodes, or
// WithErrorCodes) counts as an error in the resource's statistics and
// against its breakers, any other code as a success. An RPC that a rule
// blocks ends with codes.ResourceExhausted (a flow rule's limit) or
// codes.Unavailable (a breaker, or a shed or adaptive rule finding the
// service overloaded), a google.rpc.RetryInfo detail saying when to retry
// where the rule knows it (see BlockStatus); on a client the call never
// reaches the network. An RPC that ends with an error of code
// ResourceExhausted, Unavailable or DeadlineExceeded is recorded as
// overloaded (slidegate.IsOverloaded), so that an adaptive rule on the
// client or on the server backs off; the caller gets the error unchanged.
//
// Server interceptors enter with slidegate.Inbound, so the guard also counts
// the service's traffic as a whole (Guard.Inbound); client interceptors
// enter as outbound traffic.
//
//	g, err := slidegate.New()
//	_ = g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
//		{Resource: "/shop.Orders/Create", Limit: 100}, // 100 per second
//	}})
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(grpcguard.UnaryServerInterceptor(g)),
//		grpc.ChainStreamInterceptor(grpcguard.StreamServerInterceptor(g)),
//	)
//
//	conn, err := grpc.NewClient(addr,
//		grpc.WithTransportCredentials(insecure.NewCredentials()),
//		grpc.WithChainUnaryInterceptor(grpcguard.UnaryClientInterceptor(g)),
//		grpc.WithChainStreamInterceptor(grpcguard.StreamClientInterceptor(g)),
//	)
//
// The error a blocked RPC returns is a gRPC status error (status.Code,
// status.Convert) that also wraps the *slidegate.BlockError, so that the
// client that made the call can take it apart with errors.As; only the
// status crosses the network.
//
// # Retries
//
// WithRetry makes UnaryClientInterceptor retry the calls that fail with
// codes.Unavailable (or the codes its RetryPolicy lists) within a
// flow.RetryBudget: retries add at most a ratio of the recent calls plus a
// floor, however the service fails. No retry is sent into an open breaker,
// and a half-open breaker's probe is never retried. Streams are not
// retried. grpc-go's own retries (a service config's retryPolicy) should
// then stay off: they would multiply with these, outside the budget.
//
//	budget, _ := flow.NewRetryBudget(flow.RetryBudgetSettings{Ratio: 0.2, MinPerSecond: 10})
//	in := grpcguard.UnaryClientInterceptor(g, grpcguard.WithRetry(budget, grpcguard.RetryPolicy{}))
//
// # Keys
//
// An RPC's key (slidegate.WithKey) is what a resource's per-key rules
// (slidegate.FlowRule.PerKey) limit on its own: a client address, a
// tenant, an API key. On a server, KeyFromPeer keys each RPC by its
// client's IP address (an IPv6 client by its /64), believing the
// "x-forwarded-for" metadata only from the proxies it is told to trust
// (grpc-gateway, Envoy; see PeerAddr), and
// KeyFromMetadata by an incoming metadata value; KeyFrom, on servers and
// clients alike, by any function of the RPC's context and method. Without
// one of them every RPC has the empty key "", one key like any other.
//
//	// At most 100 RPCs per second from each tenant.
//	_ = g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
//		{Resource: "/shop.Orders/Create", Limit: 100, PerKey: true},
//	}})
//	in := grpcguard.UnaryServerInterceptor(g, grpcguard.KeyFromMetadata("x-tenant"))
//
// A key is input a client chooses: the guard gets at most
// slidegate.MaxKeyLength bytes of it, and the status of a blocked RPC never
// repeats it.
//
// A server handler that panics is recorded as an error and the panic goes
// on, unrecovered: grpcguard does not turn panics into statuses, which is a
// recovery interceptor's job.
package grpcguard
